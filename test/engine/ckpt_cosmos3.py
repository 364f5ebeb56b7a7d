"""NVIDIA Cosmos 3's unified checkpoints (vLLM 0.32's cosmos3.py
Cosmos3ForConditionalGeneration), tiny.  transformers 5.19's
Cosmos3OmniForConditionalGeneration (a Qwen3-VL text model and tower,
the qwen3_vl case's sizes) is saved (transformers 5.19 writes the flat
names itself) and its tensors written as the unified checkpoint names them (transformers' conversion_mapping.py
"cosmos3_omni" entry, read backwards): the text model flat (layers.,
embed_tokens., norm.) with Diffusers' attention names (to_q, to_k, to_v,
to_out, norm_q, norm_k) and lm_head. in transformer/, two files; the
tower flat (blocks., merger., patch_embed., pos_embed.,
deepstack_merger_list.) in vision_encoder/.  transformer/ also holds a
few of the generation tower's tensors, which vLLM's hf_to_vllm_mapper
drops (layers.N.mlp_moe_gen., input_layernorm_moe_gen,
self_attn.add_q_proj ... to_add_out, norm_added_q/k, norm_moe_gen,
proj_in., proj_out., time_embedder.); vae/ a safetensors file vLLM's
glob "[tv]*er/*.safetensors" does not match.  config.json (model_type
cosmos3_omni, architectures Cosmos3ForConditionalGeneration), the
tokenizer and the Qwen3-VL processor are at the top."""
import json
import os


# the tower's names, flat
VIT = ("blocks.", "merger.", "patch_embed.", "pos_embed.", "deepstack_merger_list.")


def _flat(name):
    """The unified checkpoint's name for name (transformers 5.19's
    save_pretrained writes them so already, reversing its conversion)."""
    for old, new in (("model.language_model.", ""), ("model.visual.", "")):
        if name.startswith(old):
            name = new + name[len(old):]
            break
    for old, new in ((".self_attn.q_proj.", ".self_attn.to_q."),
                     (".self_attn.k_proj.", ".self_attn.to_k."),
                     (".self_attn.v_proj.", ".self_attn.to_v."),
                     (".self_attn.o_proj.", ".self_attn.to_out."),
                     (".self_attn.q_norm.", ".self_attn.norm_q."),
                     (".self_attn.k_norm.", ".self_attn.norm_k.")):
        name = name.replace(old, new)
    return name


def save_unified(out, llm, vit, rnd):
    """Writes a Cosmos 3 unified checkpoint's weights: llm (the text model
    and the generation tower's tensors) in two shards under transformer/,
    vit under vision_encoder/, and a VAE (from rnd) whose names clash with
    the text model's: read, it would be refused."""
    from safetensors.torch import save_file
    names = sorted(llm)
    half = len(names) // 2
    parts = {"transformer/diffusion_pytorch_model-00001-of-00002.safetensors": names[:half],
             "transformer/diffusion_pytorch_model-00002-of-00002.safetensors": names[half:]}
    for sub in ("transformer", "vision_encoder", "vae"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    for fname, keys in parts.items():
        save_file({k: llm[k] for k in keys}, os.path.join(out, fname), metadata={"format": "pt"})
    save_file(vit, os.path.join(out, "vision_encoder/model.safetensors"),
              metadata={"format": "pt"})
    save_file({"embed_tokens.weight": rnd(4, 4), "decoder.conv_in.weight": rnd(8, 4, 3, 3)},
              os.path.join(out, "vae/diffusion_pytorch_model.safetensors"),
              metadata={"format": "pt"})


def make(out):
    import torch
    import transformers
    from ckpt_io import noise, saved_tensors
    import make_ckpt

    over = make_ckpt.CASES["qwen3_vl"][2]
    kw = dict(over, text_config=dict(make_ckpt.COMMON, **over["text_config"]))
    cfg = transformers.Cosmos3OmniConfig(**kw)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.Cosmos3OmniForConditionalGeneration(cfg).to(torch.bfloat16)
    os.makedirs(out, exist_ok=True)
    sd = saved_tensors(model, out)
    text = cfg.text_config
    h, inter, hd = text.hidden_size, text.intermediate_size, text.head_dim
    nq, nkv = text.num_attention_heads * hd, text.num_key_value_heads * hd
    g = torch.Generator().manual_seed(77)
    rnd = noise(g, s=0.02, dtype=torch.bfloat16)
    llm, vit = {}, {}
    for name, t in sd.items():
        flat = _flat(name)
        (vit if flat.startswith(VIT) else llm)[flat] = t.contiguous()
    gen = {"norm_moe_gen.weight": rnd(h), "proj_in.weight": rnd(h, 16),
           "proj_in.bias": rnd(h), "proj_out.weight": rnd(16, h),
           "time_embedder.linear_1.weight": rnd(h, 32)}
    for n in range(text.num_hidden_layers):
        p = "layers.%d." % n
        gen.update({p + "self_attn.add_q_proj.weight": rnd(nq, h),
                    p + "self_attn.add_k_proj.weight": rnd(nkv, h),
                    p + "self_attn.add_v_proj.weight": rnd(nkv, h),
                    p + "self_attn.to_add_out.weight": rnd(h, nq),
                    p + "self_attn.norm_added_q.weight": rnd(hd),
                    p + "self_attn.norm_added_k.weight": rnd(hd),
                    p + "input_layernorm_moe_gen.weight": rnd(h),
                    p + "post_attention_layernorm_moe_gen.weight": rnd(h),
                    p + "mlp_moe_gen.gate_proj.weight": rnd(inter, h),
                    p + "mlp_moe_gen.up_proj.weight": rnd(inter, h),
                    p + "mlp_moe_gen.down_proj.weight": rnd(h, inter)})
    llm.update(gen)
    save_unified(out, llm, vit, rnd)
    cfg.architectures = ["Cosmos3ForConditionalGeneration"]
    cfg.save_pretrained(out)
    with open(os.path.join(out, "vae/config.json"), "w") as f:
        json.dump({"_class_name": "AutoencoderKLWan"}, f)
    make_ckpt.qwen3_vl_processor(out, cfg)
