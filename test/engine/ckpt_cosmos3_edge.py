"""NVIDIA Cosmos 3 Edge's unified checkpoints (vLLM 0.32's
cosmos3_edge.py Cosmos3EdgeForConditionalGeneration), tiny.
transformers 5.19's Cosmos3EdgeForConditionalGeneration (COMMON's text
model: 2 blocks of 256, 4 heads and 2 kv heads of 64, a relu^2 MLP of
512; a SigLIP2 tower of 2 layers of 64, 14-pixel patches, merged 2x2 by
a projector of 128) is saved (transformers 5.19 writes the text model's
flat Diffusers names itself, reversing its conversion_mapping.py
"cosmos3_edge" entry: layers.N.self_attn.to_q ... to_out, mlp.up_proj,
mlp.down_proj, embed_tokens., norm., lm_head.) into transformer/, two
files, with a few of the generation and action towers' tensors, which
vLLM's hf_to_vllm_mapper drops (cosmos3_edge.py:504-532); the tower and
projector (model.visual., model.projector.) into vision_encoder/ under
SigLIP2's own names (q_proj, k_proj, v_proj, mlp.fc1, mlp.fc2: the same
reversal writes the tower's as to_q ... and up_proj/down_proj, which
vLLM's mapper would not read back); vae/ a safetensors file vLLM's glob
"[tv]*er/*.safetensors" does not match.  config.json is transformers'
with the projector_config vLLM's own Cosmos3EdgeConfig reads
(transformers_utils/configs/cosmos3_edge.py: input_hidden_size,
merger_intermediate_size, out_hidden_size, spatial_merge_size); the
tokenizer and transformers' Cosmos3EdgeProcessor (56x56 images: 16
patches, 4 image tokens) at the top."""
import json
import os


def _vision_name(name):
    """The tower's SigLIP2 name for transformers' saved one."""
    for old, new in ((".self_attn.to_q.", ".self_attn.q_proj."),
                     (".self_attn.to_k.", ".self_attn.k_proj."),
                     (".self_attn.to_v.", ".self_attn.v_proj."),
                     (".mlp.up_proj.", ".mlp.fc1."), (".mlp.down_proj.", ".mlp.fc2.")):
        name = name.replace(old, new)
    return name


def processor(out, cfg):
    """A word-level tokenizer and transformers' Cosmos3EdgeProcessor, which
    vLLM reads with its own image and video processors (vLLM's
    transformers_utils/processors/cosmos3_edge.py)."""
    import transformers
    from make_ckpt import vision_tokenizer
    tok = vision_tokenizer(cfg)
    px = 56 * 56
    kw = dict(size={"shortest_edge": px, "longest_edge": px}, patch_size=14, merge_size=2,
              temporal_patch_size=1)
    transformers.Cosmos3EdgeProcessor(
        image_processor=transformers.Cosmos3EdgeImageProcessor(**kw), tokenizer=tok,
        video_processor=transformers.Cosmos3EdgeVideoProcessor(**kw)).save_pretrained(out)


def make(out):
    import torch
    import transformers
    from ckpt_cosmos3 import save_unified
    from ckpt_io import saved_tensors
    from make_ckpt import COMMON

    text = dict(COMMON, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                         "mrope_section": [12, 10, 10]})
    vision = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, patch_size=14, num_patches=16)
    cfg = transformers.Cosmos3EdgeConfig(text_config=text, vision_config=vision,
                                         projector_hidden_size=128, image_token_id=999,
                                         video_token_id=998, vision_start_token_id=997,
                                         vision_end_token_id=996)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.Cosmos3EdgeForConditionalGeneration(cfg).to(torch.bfloat16)
    os.makedirs(out, exist_ok=True)
    sd = saved_tensors(model, out)
    h, hd = cfg.text_config.hidden_size, cfg.text_config.head_dim
    g = torch.Generator().manual_seed(78)

    def rnd(*shape):
        return (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)
    llm, vit = {}, {}
    for name, t in sd.items():
        if name.startswith(("model.visual.", "model.projector.")):
            vit[_vision_name(name)] = t.contiguous()
        else:
            llm[name] = t.contiguous()
    gen = {"norm_moe_gen.weight": rnd(h), "proj_in.weight": rnd(h, 16),
           "proj_out.weight": rnd(16, h), "time_embedder.linear_1.weight": rnd(h, 32),
           "action_modality_embed": rnd(h), "action_proj_in.fc.weight": rnd(h, 8)}
    for n in range(cfg.text_config.num_hidden_layers):
        p = "layers.%d." % n
        gen.update({p + "self_attn.add_q_proj.weight": rnd(h, h),
                    p + "self_attn.to_add_out.weight": rnd(h, h),
                    p + "self_attn.norm_added_q.weight": rnd(hd),
                    p + "self_attn.k_norm_und_for_gen.weight": rnd(hd),
                    p + "input_layernorm_moe_gen.weight": rnd(h),
                    p + "mlp_moe_gen.up_proj.weight": rnd(64, h)})
    llm.update(gen)
    save_unified(out, llm, vit, rnd)
    cfg.save_pretrained(out)
    path = os.path.join(out, "config.json")
    c = json.load(open(path))
    c["projector_config"] = {"input_hidden_size": vision["hidden_size"],
                             "merger_intermediate_size": c["projector_hidden_size"],
                             "out_hidden_size": h, "spatial_merge_size": 2}
    with open(path, "w") as f:
        json.dump(c, f, indent=2)
    with open(os.path.join(out, "vae/config.json"), "w") as f:
        json.dump({"_class_name": "AutoencoderKLWan"}, f)
    processor(out, cfg)
