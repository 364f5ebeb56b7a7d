"""Ovis2 (Ovis, model_type ovis: AIDC-AI/Ovis2-1B ... 34B), tiny, in its
release's layout as vLLM 0.32 reads it (model_executor/models/ovis.py,
aimv2.py, qwen2.py; its own OvisConfig, transformers_utils/configs/ovis.py):
the Qwen2 text model under llm.model. and llm.lm_head; the AIMv2 visual
tokenizer under visual_tokenizer.backbone. in the names of the release's
remote code (preprocessor.patchifier.proj and .norm, preprocessor.pos_embed
[1, patches, width], trunk.blocks.N.attn.qkv (q, k and v fused), attn.proj,
mlp.fc1/fc2/fc3, norm_1/norm_2, trunk.post_trunk_norm, which vLLM drops)
and its head, visual_tokenizer.head.0 and .1; the visual embedding table
vte.  Made from transformers' own classes (Qwen2ForCausalLM,
Aimv2VisionModel without its pooling head, renamed and its q, k and v
concatenated as the release holds them; nn.Linear, nn.LayerNorm,
nn.Embedding).

config.json as the release writes it (llm_config a Qwen2 config,
visual_tokenizer_config of model type aimv2_visual_tokenizer with its
backbone_config, hidden_size, multimodal_max_length).  vLLM takes the
image pad of a Qwen2 text model at 151655 (ovis.py's IMAGE_PAD_TOKEN_ID_MAP):
the vocabulary is Qwen2's 151936, and a word-level tokenizer holds <image>
and <|image_pad|> at the release's ids.  vLLM's own OvisProcessor reads it
and a CLIPImageProcessor of 56 pixels: a 56x56 image is one crop of 4x4
patches merged 2x2, 7 pads.

    make(out)
"""
import os

TEXT = dict(vocab_size=151936, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
            rms_norm_eps=1e-6, bos_token_id=151643, eos_token_id=151645, pad_token_id=151643,
            tie_word_embeddings=False)
BACKBONE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                num_channels=3, image_size=56, patch_size=14, rms_norm_eps=1e-5,
                qkv_bias=False, mlp_bias=False)
VISUAL_VOCAB = 512
SPECIAL = {"<unk>": 0, "<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
           "<|image_pad|>": 151655, "<image>": 151665}
# transformers' Aimv2VisionModel's names -> the release's (remote code):
# prefixes, then parts of a block's names
PREFIXES = (("embeddings.patch_embed.", "preprocessor.patchifier.proj."),
            ("embeddings.rms_norm.", "preprocessor.patchifier.norm."),
            ("rms_norm.", "trunk.post_trunk_norm."), ("encoder.layers.", "trunk.blocks."))
PARTS = ((".attention.", ".attn."), (".attn.out_proj.", ".attn.proj."),
         (".ffn.gate_proj.", ".mlp.fc1."), (".ffn.up_proj.", ".mlp.fc3."),
         (".ffn.down_proj.", ".mlp.fc2."), (".rms_norm1.", ".norm_1."),
         (".rms_norm2.", ".norm_2."))


def release_backbone(sd):
    """The AIMv2 tower's tensors (transformers' names) in the release's."""
    import torch
    out = {}
    for k, t in sd.items():
        if k.startswith("head."):
            continue
        if k == "embeddings.position_embedding.weight":
            out["preprocessor.pos_embed"] = t.unsqueeze(0).contiguous()
            continue
        if k.endswith((".attention.k_proj.weight", ".attention.v_proj.weight")):
            continue
        if k.endswith(".attention.q_proj.weight"):
            # q, k and v as one tensor, attn.qkv
            base = k[:-len("q_proj.weight")]
            t = torch.cat([sd[base + p + "_proj.weight"] for p in "qkv"]).contiguous()
            k = base + "qkv.weight"
        for a, b in PREFIXES:
            if k.startswith(a):
                k = b + k[len(a):]
                break
        for a, b in PARTS:
            k = k.replace(a, b)
        out[k] = t
    return out


def make(out):
    import torch
    import transformers
    from ckpt_io import module_tensors, saved_tensors, save_shards, write_release_config
    from make_ckpt import word_tokenizer
    tcfg = transformers.Qwen2Config(**TEXT)
    bcfg = transformers.Aimv2VisionConfig(use_head=False, **BACKBONE)
    torch.manual_seed(1234)
    llm = transformers.Qwen2ForCausalLM(tcfg)
    tower = module_tensors({"t": transformers.Aimv2VisionModel(bcfg)})
    sd = {"visual_tokenizer.backbone." + k: t for k, t in
          release_backbone({k[2:]: t for k, t in tower.items()}).items()}
    sd.update(module_tensors({
        "visual_tokenizer.head.0": torch.nn.Linear(BACKBONE["hidden_size"] * 4,
                                                   VISUAL_VOCAB - 5, bias=False),
        "visual_tokenizer.head.1": torch.nn.LayerNorm(VISUAL_VOCAB - 5),
        "vte": torch.nn.Embedding(VISUAL_VOCAB, TEXT["hidden_size"])}))
    assert "visual_tokenizer.backbone.trunk.blocks.0.attn.qkv.weight" in sd, sorted(sd)
    os.makedirs(out, exist_ok=True)
    sd.update({"llm." + k: t for k, t in saved_tensors(llm.to(torch.bfloat16), out).items()})
    groups = [sorted(k for k in sd if k.startswith(("visual_tokenizer.", "vte."))),
              sorted(k for k in sd if k.startswith("llm."))]
    save_shards(out, sd, groups)
    lc = tcfg.to_diff_dict()
    for k in ("transformers_version", "dtype", "torch_dtype"):
        lc.pop(k, None)
    lc.update(model_type="qwen2", architectures=["Qwen2ForCausalLM"])
    write_release_config(out, {
            "architectures": ["Ovis"], "model_type": "ovis", "torch_dtype": "bfloat16",
            "hidden_size": TEXT["hidden_size"], "multimodal_max_length": 8192,
            "conversation_formatter_class": "QwenConversationFormatter",
            "disable_tie_weight": False, "llm_config": lc,
            "visual_tokenizer_config": {
                "model_type": "aimv2_visual_tokenizer", "vocab_size": VISUAL_VOCAB,
                "tokenize_function": "softmax", "tau": 1.0, "depths": None,
                "drop_cls_token": False, "hidden_stride": 2,
                "backbone_config": dict(BACKBONE, model_type="aimv2")}}, {})
    tok = word_tokenizer(tcfg, SPECIAL, "<|endoftext|>", "<|im_end|>", "<|im_start|>", "<unk>")
    tok.save_pretrained(out)
    transformers.CLIPImageProcessor(
        size={"shortest_edge": 56}, crop_size={"height": 56, "width": 56},
        image_mean=[0.48145466, 0.4578275, 0.40821073],
        image_std=[0.26862954, 0.26130258, 0.27577711]).save_pretrained(out)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
