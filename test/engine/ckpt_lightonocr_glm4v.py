"""Tiny checkpoints of two multimodal releases, as vLLM 0.32 reads them.

make_lightonocr(out): LightOnOCR (lightonai/LightOnOCR-1B-1025,
LightOnOCRForConditionalGeneration): transformers' own
LightOnOcrForConditionalGeneration (the release's tensor names:
model.vision_encoder. (Pixtral), model.vision_projection.,
model.language_model. (Qwen3), the head tied and not saved), config.json
rewritten to the release's (model_type "mistral3", architectures
LightOnOCRForConditionalGeneration, projector_hidden_act,
multimodal_projector_bias false, image_token_id; text_config a Qwen3 one with
tie_word_embeddings true, vision_config a Pixtral one), plus make_ckpt.py's
word-level tokenizer and PixtralProcessor (vLLM's LightOnOCR processor is
Mistral 3's: it asks for a PixtralProcessor).  56x56 images of 14-pixel
patches merged 2x2.

make_glm4v(out): GLM-4V (THUDM/glm-4v-9b), see its docstring.
"""
import json
import os


def make_lightonocr(out):
    import torch
    import transformers
    from ckpt_io import perturb_and_save
    from make_ckpt import COMMON, pixtral_processor
    text = dict(COMMON, model_type="qwen3", tie_word_embeddings=True, rms_norm_eps=1e-6,
                rope_theta=1000000.0, hidden_act="silu", attention_bias=False)
    vision = dict(model_type="pixtral", hidden_size=64, intermediate_size=128,
                  num_hidden_layers=3, num_attention_heads=4, head_dim=16,
                  image_size=56, patch_size=14, num_channels=3, hidden_act="silu",
                  rope_theta=10000.0)
    cfg = transformers.LightOnOcrConfig(text_config=dict(text), vision_config=dict(vision),
                                        spatial_merge_size=2, image_token_id=10,
                                        tie_word_embeddings=True)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.LightOnOcrForConditionalGeneration(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    # config.json as the release has it (LightOnOCR-1B-1025)
    rel = {"architectures": ["LightOnOCRForConditionalGeneration"], "dtype": "bfloat16",
           "image_token_id": 10, "model_type": "mistral3",
           "multimodal_projector_bias": False, "projector_hidden_act": "gelu",
           "spatial_merge_size": 2,
           "text_config": dict(text, architectures=["Qwen3ForCausalLM"],
                               attention_dropout=0, max_window_layers=2,
                               layer_types=["full_attention"] * COMMON["num_hidden_layers"],
                               rope_scaling=None, sliding_window=None, use_cache=True,
                               use_sliding_window=False, initializer_range=0.02),
           "vision_config": dict(vision, attention_dropout=0, initializer_range=0.02),
           "vision_feature_layer": -1}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(rel, f, indent=2)
    mcfg = transformers.Mistral3Config(**{k: v for k, v in rel.items()
                                          if k not in ("architectures", "model_type")})
    mcfg.image_token_index = 10
    pixtral_processor(out, mcfg)



def make_glm4v(out):
    """GLM-4V (THUDM/glm-4v-9b, GLM4VForCausalLM, model_type chatglm, remote
    code): ckpt_chatglm's GLM-4 text model (transformers' GlmForCausalLM
    rewritten into transformer.*), and the EVA2-CLIP tower under
    transformer.vision.: its layers from transformers' CLIPVisionModel
    (layer_norm1/2 -> input_layernorm/post_attention_layernorm, q, k, v
    (weights and biases) stacked by rows into attention.query_key_value,
    out_proj -> attention.dense, mlp.fc1/fc2 kept), its patch embedding
    (proj with a bias, cls_embedding [1, vH], position_embedding), the
    projector conv (2x2, vH -> H, with a bias), linear_proj (linear_proj, norm1,
    gate_proj, dense_h_to_4h, dense_4h_to_h: the GLU, no biases), boi and eoi
    [1, 1, H] made here.  config.json is glm-4v-9b's keys (vision_config,
    boi_token_id, eoi_token_id; the image pad is pad_token_id), tiny; a
    word-level tokenizer with <|endoftext|> (0), <|begin_of_image|> (997)
    and <|end_of_image|> (998): vLLM's GLM4VProcessor (its own) needs one.
    56x56 images of 14-pixel patches: 4 tokens after the 2x2 conv."""
    import torch
    import transformers
    import ckpt_chatglm
    from ckpt_io import add_shard, noise, saved_tensors
    from make_ckpt import word_tokenizer
    ckpt_chatglm.make(out, arch="GLM4VForCausalLM")
    c = json.load(open(os.path.join(out, "config.json")))
    H, F = c["hidden_size"], c["ffn_hidden_size"]
    vc = {"dropout_prob": 0.0, "hidden_act": "gelu", "in_channels": 3,
          "num_hidden_layers": 2, "hidden_size": 64, "patch_size": 14, "num_heads": 4,
          "intermediate_size": 128, "layer_norm_eps": 1e-06, "num_positions": 17,
          "image_size": 56, "scaling_factor": 8}
    vH = vc["hidden_size"]
    clip = transformers.CLIPVisionModel(transformers.CLIPVisionConfig(
        hidden_size=vH, intermediate_size=vc["intermediate_size"],
        num_attention_heads=vc["num_heads"], num_hidden_layers=vc["num_hidden_layers"],
        image_size=vc["image_size"], patch_size=vc["patch_size"])).to(torch.bfloat16)
    src = {k[len("vision_model."):] if k.startswith("vision_model.") else k: v
           for k, v in saved_tensors(clip, out).items()}
    g = torch.Generator().manual_seed(11)
    rnd = noise(g, s=0.02, dtype=torch.bfloat16)
    p = "transformer.vision."
    t = {p + "patch_embedding.proj.weight": src["embeddings.patch_embedding.weight"],
         p + "patch_embedding.proj.bias": rnd(vH),
         p + "patch_embedding.cls_embedding": src["embeddings.class_embedding"].reshape(1, vH),
         p + "patch_embedding.position_embedding.weight":
             src["embeddings.position_embedding.weight"]}
    for n in range(vc["num_hidden_layers"]):
        a, b = "encoder.layers.%d." % n, p + "transformer.layers.%d." % n
        for x in ("weight", "bias"):
            t[b + "input_layernorm." + x] = src[a + "layer_norm1." + x]
            t[b + "post_attention_layernorm." + x] = src[a + "layer_norm2." + x]
            t[b + "attention.query_key_value." + x] = torch.cat(
                [src[a + "self_attn.%s_proj.%s" % (q, x)] for q in "qkv"], 0).contiguous()
            t[b + "attention.dense." + x] = src[a + "self_attn.out_proj." + x]
            t[b + "mlp.fc1." + x] = src[a + "mlp.fc1." + x]
            t[b + "mlp.fc2." + x] = src[a + "mlp.fc2." + x]
    t[p + "linear_proj.linear_proj.weight"] = rnd(H, H)
    t[p + "linear_proj.norm1.weight"] = (1 + rnd(H).float()).to(torch.bfloat16)
    t[p + "linear_proj.norm1.bias"] = rnd(H)
    t[p + "linear_proj.gate_proj.weight"] = rnd(F, H)
    t[p + "linear_proj.dense_h_to_4h.weight"] = rnd(F, H)
    t[p + "linear_proj.dense_4h_to_h.weight"] = rnd(H, F)
    t[p + "conv.weight"] = rnd(H, vH, 2, 2)
    t[p + "conv.bias"] = rnd(H)
    t[p + "boi"] = rnd(1, 1, H)
    t[p + "eoi"] = rnd(1, 1, H)
    add_shard(out, "model-vision.safetensors", t)
    c.update({"_name_or_path": "THUDM/glm-4v-9b", "boi_token_id": 997, "eoi_token_id": 998,
              "vision_config": vc, "pad_token_id": 0, "eos_token_id": [1],
              "transformers_version": "4.44.0"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    special = {"<|endoftext|>": 0, "<|user|>": 1, "<unk>": 2, "<pad>": 3,
               "<|begin_of_image|>": 997, "<|end_of_image|>": 998}
    word_tokenizer(transformers.PretrainedConfig(vocab_size=c["padded_vocab_size"]), special,
                   "<pad>", "<|user|>", None, "<unk>").save_pretrained(out)
