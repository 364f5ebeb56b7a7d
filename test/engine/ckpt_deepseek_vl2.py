"""DeepSeek-VL2 (DeepseekVLV2ForCausalLM, deepseek-ai/deepseek-vl2-tiny's
form) as vLLM 0.32 reads it, tiny where vLLM lets it be:

  language.*   the DeepSeek-MoE/V2 text model with plain multi-head
               attention (qk_nope_head_dim = qk_rope_head_dim = 0, as tiny
               and small have): transformers' own Glm4MoeForCausalLM set up
               as DeepSeek-MoE (ckpt_deepseek_moe.py), 2 layers, layer 0
               dense, 4 routed experts and 2 shared in layer 1, renamed
               model.* -> language.model.*, lm_head -> language.lm_head;
  vision.*     timm's vit_so400m_patch14_siglip_384 at full size (vLLM builds
               that model whatever vision_config says: 27 layers of 1152),
               randomly initialised and perturbed, as the release names it;
  projector.*  downsample_mlp_gelu, depth 2 (layers.0 and layers.2), plain
               nn.Linear, n_embed the text hidden size;
  image_newline, view_seperator (sic).

config.json as the release has it (language_config, vision_config,
projector_config, tile_tag 2D, global_view_pos head, candidate_resolutions
one 384x384 tile), with the release's processor_config.json (vLLM's own
DeepseekVLV2Processor) and a word tokenizer holding the processor's special
tokens inside the vocabulary (<image> = 994).

    make(out)      tiny's and small's form (multi-head attention)
    make_mla(out)  deepseek-vl2's (the full model's) form: MLA with a q LoRA
                   (q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa,
                   kv_a_layernorm, kv_b_proj), built with transformers'
                   DeepseekV3ForCausalLM; kv_lora_rank 256 + qk_rope_head_dim
                   64, a size vLLM's CPU MLA backend takes"""
import json
import os

SPECIAL = {"<｜begin▁of▁sentence｜>": 0, "<｜end▁of▁sentence｜>": 1, "<unk>": 3,
           "<｜▁pad▁｜>": 5, "<|ref|>": 986, "<|/ref|>": 987, "<|det|>": 988,
           "<|/det|>": 989, "<|grounding|>": 990, "<|User|>": 991, "<|Assistant|>": 992,
           "<image>": 994}


def make(out):
    _make(out, mla=False)


def make_mla(out):
    _make(out, mla=True)


# The text model's sizes (DeepSeek-VL2's and DeepSeek-OCR's test checkpoints):
# hidden, heads, vocabulary, dense MLP, experts, expert MLP, shared experts,
# dense layers first, layers
H, NH, V, I, E, I_MOE, SHARED, FIRST_DENSE, LAYERS = 256, 4, 1000, 512, 4, 128, 2, 1, 2


def text_model(out, prefix, seed, mla=False):
    """The DeepSeek-V2 text model's tensors under prefix: transformers'
    Glm4MoeForCausalLM set up as DeepSeek-MoE (multi-head attention), or
    DeepseekV3ForCausalLM (MLA with a q LoRA), perturbed and saved
    (ckpt_io.saved_tensors), without the sigmoid router's correction bias
    (these models route by softmax, greedy)."""
    import torch
    import transformers
    from ckpt_io import saved_tensors
    from ckpt_deepseek_moe import glm_config
    cfg = glm_config(H, NH, V, I, E, I_MOE, SHARED, FIRST_DENSE, LAYERS, 4096)
    if mla:
        cfg = transformers.DeepseekV3Config(
            hidden_size=H, intermediate_size=I, moe_intermediate_size=I_MOE,
            num_hidden_layers=LAYERS, num_attention_heads=NH, num_key_value_heads=NH,
            n_routed_experts=E, n_shared_experts=SHARED, num_experts_per_tok=2,
            first_k_dense_replace=FIRST_DENSE, n_group=1, topk_group=1,
            routed_scaling_factor=1.0, norm_topk_prob=False, q_lora_rank=128,
            kv_lora_rank=256, qk_nope_head_dim=64, qk_rope_head_dim=64, v_head_dim=64,
            vocab_size=V, max_position_embeddings=4096, tie_word_embeddings=False,
            rms_norm_eps=1e-6)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(seed)
    lm = (transformers.DeepseekV3ForCausalLM if mla else
          transformers.Glm4MoeForCausalLM)(cfg).to(torch.bfloat16)
    return {prefix + k: v for k, v in saved_tensors(lm, out).items()
            if not k.endswith("mlp.gate.e_score_correction_bias")}


def language_config(mla=False):
    """config.json's language_config for text_model's tensors, as the
    releases write it."""
    language = {
        "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
        "bos_token_id": 0, "eos_token_id": 1, "first_k_dense_replace": FIRST_DENSE,
        "hidden_size": H, "intermediate_size": I, "kv_lora_rank": None, "lm_head": True,
        "max_position_embeddings": 4096, "moe_intermediate_size": I_MOE,
        "n_group": 1, "n_routed_experts": E, "n_shared_experts": SHARED,
        "num_attention_heads": NH, "num_experts_per_tok": 2, "num_hidden_layers": LAYERS,
        "num_key_value_heads": NH, "q_lora_rank": None, "qk_nope_head_dim": 0,
        "qk_rope_head_dim": 0, "rm_head": False, "topk_group": 1, "topk_method": "greedy",
        "torch_dtype": "bfloat16", "use_mla": mla, "v_head_dim": 0, "vocab_size": V,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "routed_scaling_factor": 1.0,
        "norm_topk_prob": False, "scoring_func": "softmax", "moe_layer_freq": 1,
        "tie_word_embeddings": False}
    if mla:
        language.update(q_lora_rank=128, kv_lora_rank=256, qk_nope_head_dim=64,
                        qk_rope_head_dim=64, v_head_dim=64)
    return language


def write_config(out, c):
    """config.json, no generation_config.json, and the word tokenizer with
    DeepSeek-VL2's special tokens."""
    import transformers
    from make_ckpt import word_tokenizer
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2, ensure_ascii=False)
    gc = os.path.join(out, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)
    tok = word_tokenizer(transformers.PretrainedConfig(vocab_size=V), SPECIAL,
                         "<｜▁pad▁｜>", "<｜end▁of▁sentence｜>", "<｜begin▁of▁sentence｜>", "<unk>")
    tok.save_pretrained(out)


def _make(out, mla):
    import torch
    import timm
    from ckpt_io import noise, save_shards
    sd = text_model(out, "language.", 1260, mla)
    vit = timm.create_model("vit_so400m_patch14_siglip_384.webli", pretrained=False,
                            num_classes=0, dynamic_img_size=True, dynamic_img_pad=True)
    with torch.no_grad():
        for k, v in vit.state_dict().items():
            sd["vision." + k] = (v + torch.randn_like(v) * 0.02).to(torch.bfloat16).contiguous()
    del vit
    n_embed, input_dim, ds = H, 1152, 2
    g = torch.Generator().manual_seed(1261)
    rnd = noise(g, s=0.02, dtype=torch.bfloat16)
    sd["projector.layers.0.weight"] = rnd(n_embed, input_dim * ds * ds)
    sd["projector.layers.0.bias"] = rnd(n_embed)
    sd["projector.layers.2.weight"] = rnd(n_embed, n_embed)
    sd["projector.layers.2.bias"] = rnd(n_embed)
    sd["image_newline"] = rnd(n_embed, s=1 / n_embed ** 0.5)
    sd["view_seperator"] = rnd(n_embed, s=1 / n_embed ** 0.5)
    names = sorted(sd)
    os.makedirs(out, exist_ok=True)
    save_shards(out, sd, [[k for k in names if k.startswith("language.")],
                          [k for k in names if k.startswith("vision.blocks.") and
                           int(k.split(".")[2]) < 14],
                          [k for k in names if not k.startswith("language.") and not (
                              k.startswith("vision.blocks.") and int(k.split(".")[2]) < 14)]])
    language = language_config(mla)
    c = {"architectures": ["DeepseekVLV2ForCausalLM"], "model_type": "deepseek_vl_v2",
         "candidate_resolutions": [[384, 384]], "global_view_pos": "head",
         "language_config": language,
         "projector_config": {"model_type": "mlp_projector", "projector_type": "downsample_mlp_gelu",
                              "input_dim": input_dim, "n_embed": n_embed, "depth": 2,
                              "mlp_ratio": 1, "downsample_ratio": ds, "token_pooling": False},
         "vision_config": {"model_type": "vision", "model_name": "siglip_so400m_patch14_384",
                           "image_size": 384, "patch_size": 14, "width": 1152, "layers": 27,
                           "heads": 16, "mlp_ratio": 3.7362, "global_pool": "map",
                           "ignore_head": True, "class_token": False, "num_classes": 0,
                           "weight_init": "skip", "deterministic": False,
                           "num_recomputing_layers": 0, "use_checkpoint": False},
         "tile_tag": "2D", "torch_dtype": "bfloat16", "transformers_version": "4.38.2"}
    write_config(out, c)
    with open(os.path.join(out, "processor_config.json"), "w") as f:
        json.dump({"add_special_token": False, "candidate_resolutions": [[384, 384]],
                   "downsample_ratio": ds, "ignore_id": -100, "image_mean": [0.5, 0.5, 0.5],
                   "image_std": [0.5, 0.5, 0.5], "image_token": "<image>", "mask_prompt": False,
                   "normalize": True, "pad_token": "<｜▁pad▁｜>", "patch_size": 14,
                   "processor_class": "DeepseekVLV2Processor", "sft_format": "deepseek"},
                  f, indent=2, ensure_ascii=False)
