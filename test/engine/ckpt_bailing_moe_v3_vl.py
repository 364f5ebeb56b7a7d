"""Ling 3's vision-language model (BailingMoeV3VLForConditionalGeneration,
vLLM 0.32 bailing_moe_v3_vl.py), tiny: a faithful stand-in, since
transformers 5.19 has no class for it and no release was at hand.  Its
names and shapes are vLLM's (the model's hf_to_vllm_mapper, :290-300, and
its modules):

  model.word_embeddings, model.layers.*, model.norm, lm_head
      ckpt_bailing_moe_v3's Ling 3 text model as it is (transformers'
      KimiLinearForCausalLM in the release's names; 4 layers, KDA and MLA
      alternating, and its MTP layer model.layers.4)
  model.visual.*
      a Qwen3-VL vision tower built by transformers' own
      Qwen3VLVisionModel (no deepstack: vLLM builds none for Bailing,
      :220): patch_embed.proj, pos_embed, 2 blocks of 4 heads of 16 (fused
      attn.qkv with its bias), and of its merger the norm alone (vLLM's
      BailingMoeV3VisionPatchMerger has no MLP: merger.linear_fc1/2 are
      not written)
  model.linear_proj.0 and .2
      the projector, nn.Sequential(Linear, GELU, Linear) from the merged
      patches (4 x 64) to the text width, with biases (fresh values)

config.json as vLLM's own BailingMoeV3VLConfig reads it (model_type
bailing_moe_v3_vl, transformers_utils/configs/bailing_moe_v3_vl.py): the
text model's keys under text_config (model_type bailing_hybrid), the
tower's under vision_config, mrope_section split over the MLA rope's 16
frequencies.  A word-level tokenizer with the image tokens and
Qwen3-VL's processor stand in for the release's (remote code), which vLLM
needs to start: the case compares bytes (as Ling 3's does), text prompts
alone.
"""
import json
import os

import ckpt_bailing_moe_v3
import make_ckpt

VISION = dict(depth=2, hidden_size=64, num_heads=4, intermediate_size=128, in_channels=3,
              patch_size=16, spatial_merge_size=2, temporal_patch_size=2,
              num_position_embeddings=16, hidden_act="gelu_pytorch_tanh",
              deepstack_visual_indexes=[])
IMAGE, VIDEO, V_START, V_END = 999, 998, 997, 996


def make(out):
    import torch
    import transformers
    from ckpt_io import add_to_first_shard, module_tensors, noise
    ckpt_bailing_moe_v3.make(out)
    text = json.load(open(os.path.join(out, "config.json")))
    os.remove(os.path.join(out, "configuration_bailing_moe_v3.py"))
    for k in ("auto_map", "architectures", "dtype", "transformers_version"):
        text.pop(k, None)
    merged = VISION["hidden_size"] * VISION["spatial_merge_size"] ** 2
    vc = transformers.Qwen3VLVisionConfig(**dict(VISION, out_hidden_size=merged))
    torch.manual_seed(2468)
    tower = module_tensors({"model.visual": transformers.Qwen3VLVisionModel(vc)})
    tower = {k: v for k, v in tower.items() if not k.startswith(
        ("model.visual.merger.linear_fc", "model.visual.deepstack_merger_list."))}
    H = text["hidden_size"]
    g = torch.Generator().manual_seed(1357)
    rnd = noise(g, s=0.02, dtype=torch.bfloat16)
    tower.update({"model.linear_proj.0.weight": rnd(H, merged), "model.linear_proj.0.bias": rnd(H),
                  "model.linear_proj.2.weight": rnd(H, H), "model.linear_proj.2.bias": rnd(H)})
    add_to_first_shard(out, tower)
    c = {"architectures": ["BailingMoeV3VLForConditionalGeneration"],
         "model_type": "bailing_moe_v3_vl", "dtype": "bfloat16",
         "image_token_id": IMAGE, "video_token_id": VIDEO,
         "vision_start_token_id": V_START, "vision_end_token_id": V_END,
         "mrope_section": [8, 4, 4], "tie_word_embeddings": False,
         "text_config": dict(text, architectures=["BailingMoeV3ForCausalLM"]),
         "vision_config": dict(VISION, model_type="qwen3_moe_vit", out_hidden_size=merged)}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    # vLLM's processor for the model refuses to start without a tokenizer
    # (skip_tokenizer_init) and an HF processor (ProcessorMixin): a
    # word-level tokenizer with the image tokens and Qwen3-VL's processor
    # (16-pixel patches merged 2x2, as the tower's), standing in for the
    # release's remote code
    from types import SimpleNamespace
    text_cfg = SimpleNamespace(vocab_size=text["vocab_size"])
    tok = make_ckpt.word_tokenizer(
        SimpleNamespace(get_text_config=lambda: text_cfg),
        {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<|image_pad|>": IMAGE,
         "<|video_pad|>": VIDEO, "<|vision_start|>": V_START, "<|vision_end|>": V_END},
        "<pad>", "<eos>", "<bos>", "<unk>")
    px = 64 * 64
    kw = dict(patch_size=VISION["patch_size"], merge_size=VISION["spatial_merge_size"],
              temporal_patch_size=VISION["temporal_patch_size"])
    transformers.Qwen3VLProcessor(
        image_processor=transformers.Qwen2VLImageProcessor(
            size={"shortest_edge": px, "longest_edge": px}, **kw),
        video_processor=transformers.Qwen3VLVideoProcessor(
            size={"shortest_edge": px, "longest_edge": 2 * px}, **kw),
        tokenizer=tok).save_pretrained(out)
