"""Checkpoints in Mistral's own format, as Mistral ships Mistral Large 3,
Devstral and Magistral: params.json in place of config.json, the weights
under Mistral's names in consolidated-0000N-of-0000M.safetensors with
consolidated.safetensors.index.json (or one consolidated.safetensors), no
config.json.  vLLM 0.32 reads such a folder in its "mistral" load and
config formats (transformers_utils/configs/mistral.py adapt_config_dict
for params.json; each model's mapper for the names).

make_large3(out): Mistral Large 3 (MistralLarge3ForCausalLM, a DeepSeek-V3
under Mistral's names: model_executor/models/mistral_large_3.py), built by
transformers' own DeepseekV3ForCausalLM, tiny (2 layers, the first dense,
8 experts and one shared), its tensors renamed by the inverse of vLLM's
hf_to_vllm_mapper.  params.json has the fields of the release's (moe,
llama_4_scaling, yarn, MLA's ranks) that adapt_config_dict reads; the
router is softmax without a correction bias (adapt_config_dict sets
scoring_func softmax and topk_method None), so the DeepSeek model's
e_score_correction_bias is not written."""
import json
import os
import re
import tempfile

from ckpt_io import perturb

# DeepSeek-V3's names (as transformers saves them) -> Mistral's: the
# inverse of MistralLarge3ForCausalLM.hf_to_vllm_mapper
LARGE3_NAMES = [
    (r"model\.layers\.(\d+)\.input_layernorm\.", r"layers.\1.attention_norm."),
    (r"model\.layers\.(\d+)\.self_attn\.q_a_proj\.", r"layers.\1.attention.wq_a."),
    (r"model\.layers\.(\d+)\.self_attn\.q_a_layernorm\.", r"layers.\1.attention.q_a_norm."),
    (r"model\.layers\.(\d+)\.self_attn\.q_b_proj\.", r"layers.\1.attention.wq_b."),
    (r"model\.layers\.(\d+)\.self_attn\.kv_a_proj_with_mqa\.",
     r"layers.\1.attention.wkv_a_with_mqa."),
    (r"model\.layers\.(\d+)\.self_attn\.kv_a_layernorm\.", r"layers.\1.attention.kv_a_norm."),
    (r"model\.layers\.(\d+)\.self_attn\.kv_b_proj\.", r"layers.\1.attention.wkv_b."),
    (r"model\.layers\.(\d+)\.self_attn\.o_proj\.", r"layers.\1.attention.wo."),
    (r"model\.layers\.(\d+)\.post_attention_layernorm\.", r"layers.\1.ffn_norm."),
    (r"model\.layers\.(\d+)\.mlp\.gate_proj\.", r"layers.\1.feed_forward.w1."),
    (r"model\.layers\.(\d+)\.mlp\.down_proj\.", r"layers.\1.feed_forward.w2."),
    (r"model\.layers\.(\d+)\.mlp\.up_proj\.", r"layers.\1.feed_forward.w3."),
    (r"model\.layers\.(\d+)\.mlp\.gate\.weight", r"layers.\1.gate.weight"),
    (r"model\.layers\.(\d+)\.mlp\.shared_experts\.gate_proj\.", r"layers.\1.shared_experts.w1."),
    (r"model\.layers\.(\d+)\.mlp\.shared_experts\.down_proj\.", r"layers.\1.shared_experts.w2."),
    (r"model\.layers\.(\d+)\.mlp\.shared_experts\.up_proj\.", r"layers.\1.shared_experts.w3."),
    (r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.gate_proj\.", r"layers.\1.experts.\2.w1."),
    (r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.down_proj\.", r"layers.\1.experts.\2.w2."),
    (r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.up_proj\.", r"layers.\1.experts.\2.w3."),
    (r"model\.norm\.", "norm."),
    (r"model\.embed_tokens\.", "tok_embeddings."),
    (r"lm_head\.", "output."),
]

LARGE3_PARAMS = {
    "dim": 256, "n_layers": 2, "head_dim": 64, "hidden_dim": 512, "n_heads": 4,
    "n_kv_heads": 4, "rope_theta": 10000.0, "norm_eps": 1e-6, "vocab_size": 1000,
    "tied_embeddings": False, "max_position_embeddings": 512,
    "q_lora_rank": 128, "qk_rope_head_dim": 64, "qk_nope_head_dim": 64,
    "kv_lora_rank": 256, "v_head_dim": 64,
    "llama_4_scaling": {"original_max_position_embeddings": 256, "beta": 0.1},
    "yarn": {"original_max_position_embeddings": 256, "factor": 2.0, "apply_scale": False,
             "beta": 32, "alpha": 1},
    "moe": {"expert_parallel": 1, "route_every_n": 1, "first_k_dense_replace": 1,
            "num_experts": 8, "num_experts_per_tok": 2, "num_expert_groups": 1,
            "num_expert_groups_per_tok": 1, "routed_scale": 1.0, "expert_hidden_dim": 256,
            "num_shared_experts": 1},
}


def mistral_name(name, table):
    for pat, rep in table:
        new, n = re.subn(r"\A" + pat, rep, name)
        if n:
            return new
    raise AssertionError("no Mistral name for " + name)


def hf_tensors(model):
    """The tensors model.save_pretrained writes (per-expert names)."""
    from safetensors.torch import load_file
    got = {}
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        for f in sorted(os.listdir(tmp)):
            if f.endswith(".safetensors"):
                got.update(load_file(os.path.join(tmp, f)))
    return got


def save_consolidated(out, tensors, params, shards):
    """tensors (Mistral's names) into OUT as consolidated*.safetensors:
    one file, or shards files with consolidated.safetensors.index.json;
    params.json beside them."""
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    names = sorted(tensors)
    if shards == 1:
        save_file({n: tensors[n].contiguous() for n in names},
                  os.path.join(out, "consolidated.safetensors"))
    else:
        wmap = {}
        for i in range(shards):
            fname = f"consolidated-{i + 1:05d}-of-{shards:05d}.safetensors"
            part = names[i::shards]
            save_file({n: tensors[n].contiguous() for n in part}, os.path.join(out, fname))
            wmap.update({n: fname for n in part})
        with open(os.path.join(out, "consolidated.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": dict(sorted(wmap.items()))}, f, indent=2)
    with open(os.path.join(out, "params.json"), "w") as f:
        json.dump(params, f, indent=2)


def make_large3(out, shards=2, fp8=False):
    import torch
    import transformers
    import make_ckpt
    p = LARGE3_PARAMS
    cfg = transformers.DeepseekV3Config(**dict(
        make_ckpt.COMMON, **make_ckpt.MLA, num_hidden_layers=p["n_layers"],
        n_routed_experts=p["moe"]["num_experts"], n_shared_experts=1,
        num_experts_per_tok=2, moe_intermediate_size=p["moe"]["expert_hidden_dim"],
        first_k_dense_replace=1, n_group=1, topk_group=1, norm_topk_prob=True))
    torch.manual_seed(1234)
    model = transformers.DeepseekV3ForCausalLM(cfg).to(torch.bfloat16)
    perturb(model)
    tensors = {mistral_name(n, LARGE3_NAMES): t for n, t in hf_tensors(model).items()
               if not n.endswith("e_score_correction_bias")}
    if fp8:
        p = dict(p, quantization=FP8_QUANTIZATION)
        quantize_fp8(tensors, LARGE3_FP8)
    save_consolidated(out, tensors, p, shards)


def make_large3_single(out):
    """The same in one consolidated.safetensors, no index."""
    make_large3(out, shards=1)


# Llama's names (transformers' MistralForCausalLM) -> Mistral's: the
# inverse of vLLM's MistralForCausalLM.mistral_mapping
DENSE_NAMES = [
    (r"model\.layers\.(\d+)\.input_layernorm\.", r"layers.\1.attention_norm."),
    (r"model\.layers\.(\d+)\.post_attention_layernorm\.", r"layers.\1.ffn_norm."),
    (r"model\.layers\.(\d+)\.self_attn\.q_proj\.", r"layers.\1.attention.wq."),
    (r"model\.layers\.(\d+)\.self_attn\.k_proj\.", r"layers.\1.attention.wk."),
    (r"model\.layers\.(\d+)\.self_attn\.v_proj\.", r"layers.\1.attention.wv."),
    (r"model\.layers\.(\d+)\.self_attn\.o_proj\.", r"layers.\1.attention.wo."),
    (r"model\.layers\.(\d+)\.mlp\.gate_proj\.", r"layers.\1.feed_forward.w1."),
    (r"model\.layers\.(\d+)\.mlp\.down_proj\.", r"layers.\1.feed_forward.w2."),
    (r"model\.layers\.(\d+)\.mlp\.up_proj\.", r"layers.\1.feed_forward.w3."),
    (r"model\.norm\.", "norm."),
    (r"model\.embed_tokens\.", "tok_embeddings."),
    (r"lm_head\.", "output."),
]

DENSE_PARAMS = {
    "dim": 256, "n_layers": 2, "head_dim": 64, "hidden_dim": 512, "n_heads": 4,
    "n_kv_heads": 2, "rope_theta": 1000000.0, "norm_eps": 1e-5, "vocab_size": 1000,
    "tied_embeddings": False, "max_position_embeddings": 512,
}


def interleave_heads(w, heads):
    """Mistral's rows of a q or k weight from Llama's: within each head,
    rotary pairs interleaved (row 2k+j from row j*hd/2+k), the inverse of
    the permute of vLLM's maybe_remap_mistral."""
    rows, cols = w.shape
    hd = rows // heads
    return w.view(heads, 2, hd // 2, cols).transpose(1, 2).reshape(rows, cols)


def hf_mm_tensors(model, tower, p):
    """(text, name, tensor) for each tensor a transformers multimodal model
    (Mistral3's, Voxtral's) saves, under the older names (tower.*,
    multi_modal_projector.*, the text model's model.* and lm_head.*): text
    is true for the text model's, their q and k rows in Mistral's rotary
    order (p's n_heads and n_kv_heads)."""
    older = [("model.language_model.", "language_model.model."),
             ("model." + tower + ".", tower + "."),
             ("model.multi_modal_projector.", "multi_modal_projector."),
             ("lm_head.", "language_model.lm_head.")]
    for n, t in hf_tensors(model).items():
        for new, old in older:
            if n.startswith(new):
                n = old + n[len(new):]
        if not n.startswith("language_model."):
            yield False, n, t
            continue
        # (transformers 5 saves Voxtral's text model's names as
        # language_model.model.model.*)
        n = n[len("language_model."):]
        if n.startswith("model.model."):
            n = n[len("model."):]
        if ".q_proj." in n:
            t = interleave_heads(t, p["n_heads"])
        elif ".k_proj." in n:
            t = interleave_heads(t, p["n_kv_heads"])
        yield True, n, t


def mistral_config(p):
    """transformers' MistralConfig of a params.json's text model p (untied)."""
    import transformers
    return transformers.MistralConfig(
        hidden_size=p["dim"], num_hidden_layers=p["n_layers"], head_dim=p["head_dim"],
        intermediate_size=p["hidden_dim"], num_attention_heads=p["n_heads"],
        num_key_value_heads=p["n_kv_heads"], vocab_size=p["vocab_size"],
        rms_norm_eps=p["norm_eps"], rope_theta=p["rope_theta"],
        max_position_embeddings=p["max_position_embeddings"], tie_word_embeddings=False)


def make_dense(out, fp8=False, dynamic=False):
    """Mistral 7B's layout (MistralForCausalLM), tiny, from transformers'
    own MistralForCausalLM: its q and k rows in Mistral's rotary order;
    fp8: as Ministral 3's and Devstral's FP8 releases (quantize_fp8)."""
    import torch
    import transformers
    p = DENSE_PARAMS
    cfg = mistral_config(p)
    torch.manual_seed(1234)
    model = transformers.MistralForCausalLM(cfg).to(torch.bfloat16)
    perturb(model)
    tensors = {}
    for n, t in hf_tensors(model).items():
        if ".q_proj." in n:
            t = interleave_heads(t, p["n_heads"])
        elif ".k_proj." in n:
            t = interleave_heads(t, p["n_kv_heads"])
        tensors[mistral_name(n, DENSE_NAMES)] = t
    if fp8:
        p = dict(p, quantization=dict(FP8_QUANTIZATION,
                                      qscheme_act="NO_SCALES" if dynamic else "TENSOR"))
        quantize_fp8(tensors, DENSE_FP8, act=not dynamic)
    save_consolidated(out, tensors, p, 1)


# params.json's "quantization" of Mistral's FP8 releases (Mistral Large 3,
# Ministral 3, Devstral 2): FP8 weights, one scale a tensor, static
# activation scales (vLLM's _remap_mistral_quantization_args: quant_method
# fp8, activation_scheme static)
FP8_QUANTIZATION = {"qformat_weight": "fp8_e4m3", "qscheme_act": "TENSOR"}

# The weights quantized: every linear layer's but the router's (Mistral
# Large 3: attention, dense MLP, shared and routed experts)
LARGE3_FP8 = re.compile(r"layers\.\d+\.(attention\.w\w+|feed_forward\.w[123]|"
                        r"shared_experts\.w[123]|experts\.\d+\.w[123])\.weight\Z")
DENSE_FP8 = re.compile(r"layers\.\d+\.(attention\.w[qkvo]|feed_forward\.w[123])\.weight\Z")


def quantize_fp8(tensors, pick, act=True):
    """The weights of tensors (Mistral's names) that pick matches in
    float8_e4m3fn, each with its F32 scalar X.qscale_weight and a static
    activation scale X.qscale_act, distinct per layer and part except
    that an expert's w1 and w3 share theirs (vLLM's FusedMoE requires it),
    as Mistral's FP8 releases carry them; without act, none (dynamic
    activations, "qscheme_act" "NO_SCALES")."""
    import zlib
    import torch
    fmax = torch.finfo(torch.float8_e4m3fn).max
    for name in sorted(tensors):
        if not pick.match(name):
            continue
        w = tensors[name].float()
        s = w.abs().max().clamp(min=1e-12) / fmax
        base = name[:-len("weight")]
        tensors[name] = (w / s).to(torch.float8_e4m3fn)
        tensors[base + "qscale_weight"] = s.reshape([]).float()
        if not act:
            continue
        key = re.sub(r"(experts\.\d+\.)w3\.", r"\1w1.", base)
        tensors[base + "qscale_act"] = torch.tensor(
            0.01 + 0.001 * (zlib.crc32(key.encode()) % 7), dtype=torch.float32)


def make_large3_fp8(out):
    """Mistral Large 3 as released (FP8: quantize_fp8), two shards."""
    make_large3(out, fp8=True)


def make_dense_fp8(out):
    """Ministral 3's and Devstral's FP8 layout (MistralForCausalLM)."""
    make_dense(out, fp8=True)


def make_dense_fp8dyn(out):
    """The same with dynamic activations ("qscheme_act" "NO_SCALES"):
    no qscale_act, which vLLM's CPU build runs."""
    make_dense(out, fp8=True, dynamic=True)


def make_large3_eagle(out, embed=False, fp8=False):
    """Mistral Large 3's EAGLE draft in Mistral's format, for
    mistral_large_3's target (EagleMistralLarge3ForCausalLM: vLLM names
    a draft of MistralLarge3ForCausalLM so, config/speculative.py): one
    MLA layer of transformers' own DeepseekV3ForCausalLM, dense (its
    params.json has no moe, which adapt_config_dict makes one shared
    expert and every layer dense), under the target's names, its final
    norm, and eagle_linear ([embedding, hidden state] to hidden, vLLM's
    model.fc); no tok_embeddings or output (vLLM's draft takes the
    target's), or, with embed, both (which vLLM loads, then replaces with
    the target's)."""
    import torch
    import transformers
    import make_ckpt
    p = {k: v for k, v in LARGE3_PARAMS.items() if k != "moe"}
    p["n_layers"] = 1
    cfg = transformers.DeepseekV3Config(**dict(
        make_ckpt.COMMON, **make_ckpt.MLA, num_hidden_layers=1,
        intermediate_size=p["hidden_dim"], n_routed_experts=1,
        first_k_dense_replace=1))
    torch.manual_seed(4321)
    model = transformers.DeepseekV3ForCausalLM(cfg).to(torch.bfloat16)
    perturb(model)
    tensors = {mistral_name(n, LARGE3_NAMES): t for n, t in hf_tensors(model).items()
               if embed or not n.startswith(("model.embed_tokens.", "lm_head."))}
    tensors["eagle_linear.weight"] = (torch.randn(p["dim"], 2 * p["dim"]) * 0.02).to(torch.bfloat16)
    if fp8:
        p = dict(p, quantization=FP8_QUANTIZATION)
        quantize_fp8(tensors, re.compile(LARGE3_FP8.pattern + r"|eagle_linear\.weight\Z"))
    save_consolidated(out, tensors, p, 1)


def make_large3_eagle_embed(out):
    """The same draft with its own tok_embeddings and output."""
    make_large3_eagle(out, embed=True)


# Mistral 3's tower and projector (transformers' Mistral3ForConditionalGeneration,
# as it saves them, its older names) -> Mistral's: the inverse of vLLM's
# PixtralForConditionalGeneration.load_weights (vision_encoder.*,
# pre_mm_projector_norm, patch_merger, vision_language_adapter)
PIXTRAL_NAMES = [
    (r"vision_tower\.transformer\.layers\.(\d+)\.attention\.q_proj\.",
     r"vision_encoder.transformer.layers.\1.attention.wq."),
    (r"vision_tower\.transformer\.layers\.(\d+)\.attention\.k_proj\.",
     r"vision_encoder.transformer.layers.\1.attention.wk."),
    (r"vision_tower\.transformer\.layers\.(\d+)\.attention\.v_proj\.",
     r"vision_encoder.transformer.layers.\1.attention.wv."),
    (r"vision_tower\.transformer\.layers\.(\d+)\.attention\.o_proj\.",
     r"vision_encoder.transformer.layers.\1.attention.wo."),
    (r"vision_tower\.transformer\.layers\.(\d+)\.feed_forward\.gate_proj\.",
     r"vision_encoder.transformer.layers.\1.feed_forward.w1."),
    (r"vision_tower\.transformer\.layers\.(\d+)\.feed_forward\.down_proj\.",
     r"vision_encoder.transformer.layers.\1.feed_forward.w2."),
    (r"vision_tower\.transformer\.layers\.(\d+)\.feed_forward\.up_proj\.",
     r"vision_encoder.transformer.layers.\1.feed_forward.w3."),
    (r"vision_tower\.", "vision_encoder."),
    (r"multi_modal_projector\.norm\.", "pre_mm_projector_norm."),
    (r"multi_modal_projector\.patch_merger\.", "patch_merger."),
    (r"multi_modal_projector\.linear_1\.", "vision_language_adapter.w_in."),
    (r"multi_modal_projector\.linear_2\.", "vision_language_adapter.w_out."),
]

# Mistral Small 3.1's vision_encoder block, tiny: 56-pixel images of
# 14-pixel patches merged 2x2, [IMG] [IMG_BREAK] [IMG_END] 10, 12, 13 (the
# tekken v7 special tokens)
PIXTRAL_VISION = {
    "hidden_size": 64, "num_channels": 3, "max_image_size": 56, "patch_size": 14,
    "rope_theta": 10000.0, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "adapter_bias": False, "mm_projector_id": "patch_merge",
    "spatial_merge_size": 2, "add_pre_mm_projector_layer_norm": True,
    "image_token_id": 10, "image_break_token_id": 12, "image_end_token_id": 13,
    "image_size": 56,
}


def write_tekken(out, vocab_size, image=None, specials=100, audio=None):
    """A tiny tekken.json (v7: Mistral's default special tokens, [IMG] 10):
    the first vocab_size - specials byte tokens of mistral_common's own
    tekken_240911.json; image, the tokenizer's image config (vLLM's Pixtral
    processor takes its patch size, image size and merge from it); audio,
    its audio config ([STREAMING_PAD] 32 too where it is a streaming one,
    as Voxtral Realtime's)."""
    import mistral_common
    src = os.path.join(os.path.dirname(mistral_common.__file__), "data", "tekken_240911.json")
    with open(src) as f:
        full = json.load(f)
    n = vocab_size - specials
    tk = {"config": dict(full["config"], num_vocab_tokens=n, default_vocab_size=vocab_size,
                         default_num_special_tokens=specials, version="v7"),
          "vocab": full["vocab"][:n]}
    if image:
        tk["image"] = image
    if audio:
        # Voxtral's special tokens: v7's first 20, [AUDIO] 24,
        # [BEGIN_AUDIO] 25 and [TRANSCRIBE] 34 (mistral_common's audio
        # encoder and InstructTokenizerV7 require them), the rest fillers
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer
        named = {t["rank"]: str(t["token_str"].value if hasattr(t["token_str"], "value")
                                else t["token_str"])
                 for t in Tekkenizer.DEPRECATED_SPECIAL_TOKENS}
        named.update({24: "[AUDIO]", 25: "[BEGIN_AUDIO]", 34: "[TRANSCRIBE]"})
        if audio.get("transcription_format") == "streaming":
            named[32] = "[STREAMING_PAD]"
        tk["special_tokens"] = [{"rank": i, "token_str": named.get(i, f"<SPECIAL_{i}>"),
                                 "is_control": True} for i in range(35)]
        tk["audio"] = audio
    with open(os.path.join(out, "tekken.json"), "w") as f:
        json.dump(tk, f)


# Pixtral 12B's vision_encoder block, tiny: no patch merger and no norm
# before the adapter, whose two linears have biases (adapter_bias); each
# 14-pixel patch a token
PIXTRAL_12B_VISION = dict(PIXTRAL_VISION, adapter_bias=True, mm_projector_id="",
                          spatial_merge_size=1, add_pre_mm_projector_layer_norm=False)


def make_pixtral_12b(out):
    """Pixtral 12B's layout: make_pixtral's, its projector as Pixtral 12B's
    (adapter biases; no pre_mm_projector_norm, no patch_merger)."""
    make_pixtral(out, PIXTRAL_12B_VISION)


def make_pixtral(out, vision=PIXTRAL_VISION):
    """Mistral Small 3.1's layout (PixtralForConditionalGeneration: a
    Mistral text model, the Pixtral tower, pre_mm_projector_norm, a 2x2
    patch merger, the adapter without biases), tiny, from transformers' own
    Mistral3ForConditionalGeneration: q and k rows of the text model and of
    the tower in Mistral's rotary order; tekken.json with its image config."""
    import torch
    import transformers
    p = dict(DENSE_PARAMS, vision_encoder=vision)
    v = vision
    vheads = v["num_attention_heads"]
    text = mistral_config(p)
    cfg = transformers.Mistral3Config(
        text_config=text, image_token_index=v["image_token_id"],
        spatial_merge_size=v["spatial_merge_size"], multimodal_projector_bias=v["adapter_bias"],
        tie_word_embeddings=False,
        vision_config={"hidden_size": v["hidden_size"],
                       "intermediate_size": v["intermediate_size"],
                       "num_hidden_layers": v["num_hidden_layers"],
                       "num_attention_heads": vheads,
                       "head_dim": v["hidden_size"] // vheads,
                       "image_size": v["image_size"], "patch_size": v["patch_size"]})
    torch.manual_seed(1234)
    model = transformers.Mistral3ForConditionalGeneration(cfg).to(torch.bfloat16)
    perturb(model)
    tensors = {}
    for text, n, t in hf_mm_tensors(model, "vision_tower", p):
        if text:
            tensors[mistral_name(n, DENSE_NAMES)] = t
        else:
            if ".q_proj." in n or ".k_proj." in n:
                t = interleave_heads(t, vheads)
            n = mistral_name(n, PIXTRAL_NAMES)
            if n.startswith("patch_merger.") and v["mm_projector_id"] != "patch_merge" or \
                    n.startswith("pre_mm_projector_norm.") and \
                    not v["add_pre_mm_projector_layer_norm"]:
                continue
            tensors[n] = t
    save_consolidated(out, tensors, p, 1)
    write_tekken(out, p["vocab_size"], image={
        "image_patch_size": v["patch_size"], "max_image_size": v["max_image_size"],
        "spatial_merge_size": v["spatial_merge_size"]})

def make_large3_eagle_fp8(out):
    """The draft in FP8 (quantize_fp8), eagle_linear included (vLLM's
    mapper: model.fc.weight_scale and model.fc.input_scale)."""
    make_large3_eagle(out, fp8=True)


def make_dense_eagle(out):
    """An EAGLE-1 draft for mistral_consolidated's target in Mistral's
    format (EagleMistralForCausalLM: vLLM names a draft of a dense
    MistralForCausalLM so, transformers_utils/configs/eagle.py): one
    decoder layer of transformers' own MistralForCausalLM under Mistral's
    names (wq and wk rows in Mistral's rotary order), its final norm and
    eagle_linear ([embedding, hidden state] to hidden, vLLM's model.fc);
    no tok_embeddings or output (vLLM's draft takes the target's)."""
    import torch
    import transformers
    p = dict(DENSE_PARAMS, n_layers=1)
    cfg = mistral_config(p)
    torch.manual_seed(4321)
    model = transformers.MistralForCausalLM(cfg).to(torch.bfloat16)
    perturb(model)
    tensors = {}
    for n, t in hf_tensors(model).items():
        if n.startswith(("model.embed_tokens.", "lm_head.")):
            continue
        if ".q_proj." in n:
            t = interleave_heads(t, p["n_heads"])
        elif ".k_proj." in n:
            t = interleave_heads(t, p["n_kv_heads"])
        tensors[mistral_name(n, DENSE_NAMES)] = t
    tensors["eagle_linear.weight"] = (torch.randn(p["dim"], 2 * p["dim"]) * 0.02).to(torch.bfloat16)
    save_consolidated(out, tensors, p, 1)
# Voxtral's tower and projector (transformers' VoxtralForConditionalGeneration,
# as it saves them) -> Mistral's: the inverse of vLLM's
# VoxtralEncoderModel.mistral_remapping and load_weights' (voxtral.py)
VOXTRAL_NAMES = [
    (r"audio_tower\.conv1\.", "mm_whisper_embeddings.whisper_encoder.conv_layers.0.conv."),
    (r"audio_tower\.conv2\.", "mm_whisper_embeddings.whisper_encoder.conv_layers.1.conv."),
    (r"audio_tower\.layers\.(\d+)\.self_attn\.q_proj\.",
     r"mm_whisper_embeddings.whisper_encoder.transformer.layers.\1.attention.wq."),
    (r"audio_tower\.layers\.(\d+)\.self_attn\.k_proj\.",
     r"mm_whisper_embeddings.whisper_encoder.transformer.layers.\1.attention.wk."),
    (r"audio_tower\.layers\.(\d+)\.self_attn\.v_proj\.",
     r"mm_whisper_embeddings.whisper_encoder.transformer.layers.\1.attention.wv."),
    (r"audio_tower\.layers\.(\d+)\.self_attn\.out_proj\.",
     r"mm_whisper_embeddings.whisper_encoder.transformer.layers.\1.attention.wo."),
    (r"audio_tower\.layers\.(\d+)\.self_attn_layer_norm\.",
     r"mm_whisper_embeddings.whisper_encoder.transformer.layers.\1.attention_norm."),
    (r"audio_tower\.layers\.(\d+)\.fc1\.",
     r"mm_whisper_embeddings.whisper_encoder.transformer.layers.\1.feed_forward.w1."),
    (r"audio_tower\.layers\.(\d+)\.fc2\.",
     r"mm_whisper_embeddings.whisper_encoder.transformer.layers.\1.feed_forward.w2."),
    (r"audio_tower\.layers\.(\d+)\.final_layer_norm\.",
     r"mm_whisper_embeddings.whisper_encoder.transformer.layers.\1.ffn_norm."),
    (r"audio_tower\.layer_norm\.", "mm_whisper_embeddings.whisper_encoder.transformer.norm."),
    (r"multi_modal_projector\.linear_1\.", "mm_whisper_embeddings.audio_language_projection.0."),
    (r"multi_modal_projector\.linear_2\.", "mm_whisper_embeddings.audio_language_projection.2."),
]

# Voxtral Mini's multimodal.whisper_model_args, tiny: 32 mel bins, a
# 50-position encoder (one 1-second chunk: 100 mel frames, conv2's stride
# 2), 4 positions an audio token (12.5 a second)
VOXTRAL_AUDIO = {
    "encoder_args": {
        "audio_encoding_args": {"sampling_rate": 16000, "num_mel_bins": 32, "hop_length": 160,
                                "window_size": 400},
        "dim": 64, "n_layers": 2, "head_dim": 16, "hidden_dim": 256, "n_heads": 4,
        "vocab_size": 51866, "max_source_positions": 50},
    "downsample_args": {"downsample_factor": 4},
}


def make_voxtral(out, tied=True):
    """Voxtral Mini's layout (VoxtralForConditionalGeneration in Mistral's
    format: a Mistral text model, its embedding tied as Mini's and named
    mm_whisper_embeddings.tok_embeddings as Voxtral ships it, the Whisper
    encoder, the two-linear adapter), tiny, from transformers' own
    VoxtralForConditionalGeneration: the text model's q and k rows in
    Mistral's rotary order, its encoder's embed_positions dropped (Mistral's
    checkpoint has none); tekken.json with [AUDIO] and [BEGIN_AUDIO] and its
    audio config (1-second chunks)."""
    import torch
    import transformers
    a = VOXTRAL_AUDIO["encoder_args"]
    ds = VOXTRAL_AUDIO["downsample_args"]["downsample_factor"]
    p = dict(DENSE_PARAMS, tied_embeddings=tied, multimodal={"whisper_model_args": VOXTRAL_AUDIO})
    text = dict(
        hidden_size=p["dim"], num_hidden_layers=p["n_layers"], head_dim=p["head_dim"],
        intermediate_size=p["hidden_dim"], num_attention_heads=p["n_heads"],
        num_key_value_heads=p["n_kv_heads"], vocab_size=p["vocab_size"],
        rms_norm_eps=p["norm_eps"], rope_theta=p["rope_theta"],
        max_position_embeddings=p["max_position_embeddings"], tie_word_embeddings=tied)
    cfg = transformers.VoxtralConfig(
        text_config=text, audio_token_id=24,
        audio_config={"hidden_size": a["dim"], "intermediate_size": a["dim"] * ds,
                      "num_hidden_layers": a["n_layers"], "num_attention_heads": a["n_heads"],
                      "num_mel_bins": a["audio_encoding_args"]["num_mel_bins"],
                      "max_source_positions": a["max_source_positions"]})
    # vLLM's w1 and w2 are [hidden_dim, dim] and [dim, hidden_dim]; the
    # projector's input is dim * downsample_factor (transformers takes
    # intermediate_size for both, so the two are equal here)
    assert a["hidden_dim"] == a["dim"] * ds
    torch.manual_seed(1234)
    model = transformers.VoxtralForConditionalGeneration(cfg).to(torch.bfloat16)
    perturb(model)
    tensors = {}
    for text, n, t in hf_mm_tensors(model, "audio_tower", p):
        if text:
            if tied and n.startswith("lm_head."):
                continue
            n = mistral_name(n, DENSE_NAMES)
            if tied and n.startswith("tok_embeddings."):
                n = "mm_whisper_embeddings." + n
            tensors[n] = t
        elif n != "audio_tower.embed_positions.weight":
            tensors[mistral_name(n, VOXTRAL_NAMES)] = t
    save_consolidated(out, tensors, p, 1)
    write_tekken(out, p["vocab_size"], audio={
        "sampling_rate": 16000, "frame_rate": 12.5, "chunk_length_s": 1.0,
        "audio_encoding_config": {k: a["audio_encoding_args"][k]
                                  for k in ("num_mel_bins", "hop_length", "window_size")}})


def make_voxtral_untied(out):
    """Voxtral Small's: its own output, tok_embeddings under its own name."""
    make_voxtral(out, tied=False)


# Voxtral Realtime's encoder (transformers' VoxtralRealtimeEncoder, as it
# saves it) -> Mistral's, as Voxtral Mini 4B Realtime ships it under
# mm_streams_embeddings.embedding_module.: the inverse of vLLM's
# VoxtralEncoderModel.mistral_remapping (voxtral.py:665-717) and
# load_weights' (:494-560), the text model's ada_rms_norm_t_cond
# (mistral.py:161-178) as Mistral names it
REALTIME_PREFIX = "mm_streams_embeddings.embedding_module."
REALTIME_NAMES = [
    (r"audio_tower\.embedder\.conv1\.", "whisper_encoder.conv_layers.0.conv."),
    (r"audio_tower\.embedder\.conv2\.", "whisper_encoder.conv_layers.1.conv."),
    (r"audio_tower\.layers\.(\d+)\.self_attn\.([qkv])_proj\.",
     r"whisper_encoder.transformer.layers.\1.attention.w\2."),
    (r"audio_tower\.layers\.(\d+)\.self_attn\.o_proj\.",
     r"whisper_encoder.transformer.layers.\1.attention.wo."),
    (r"audio_tower\.layers\.(\d+)\.self_attn_layer_norm\.",
     r"whisper_encoder.transformer.layers.\1.attention_norm."),
    (r"audio_tower\.layers\.(\d+)\.mlp\.gate_proj\.",
     r"whisper_encoder.transformer.layers.\1.feed_forward.w1."),
    (r"audio_tower\.layers\.(\d+)\.mlp\.down_proj\.",
     r"whisper_encoder.transformer.layers.\1.feed_forward.w2."),
    (r"audio_tower\.layers\.(\d+)\.mlp\.up_proj\.",
     r"whisper_encoder.transformer.layers.\1.feed_forward.w3."),
    (r"audio_tower\.layers\.(\d+)\.final_layer_norm\.",
     r"whisper_encoder.transformer.layers.\1.ffn_norm."),
    (r"audio_tower\.norm\.", "whisper_encoder.transformer.norm."),
    (r"multi_modal_projector\.linear_1\.", "audio_language_projection.0."),
    (r"multi_modal_projector\.linear_2\.", "audio_language_projection.2."),
]
REALTIME_TEXT_NAMES = [
    (r"model\.layers\.(\d+)\.ada_rms_norm\.linear1\.", r"layers.\1.ada_rms_norm_t_cond.0."),
    (r"model\.layers\.(\d+)\.ada_rms_norm\.linear2\.", r"layers.\1.ada_rms_norm_t_cond.2."),
] + DENSE_NAMES

# Voxtral Mini 4B Realtime's multimodal.whisper_model_args, tiny: a causal
# encoder (WhisperCausalEncoder, whisper_causal.py: RoPE, a sliding window,
# SwiGLU, RMSNorm), 32 mel bins, 4 positions an audio token; its heads
# together wider than dim (4 of 32 over 64, as the release's 32 of 64 over
# 1280)
REALTIME_AUDIO = {
    "encoder_args": {
        "audio_encoding_args": {"sampling_rate": 16000, "num_mel_bins": 32, "hop_length": 160,
                                "window_size": 400, "global_log_mel_max": 1.5},
        "dim": 64, "n_layers": 2, "head_dim": 32, "hidden_dim": 128, "n_heads": 4,
        "vocab_size": 131072, "causal": True, "sliding_window": 64, "pos_embed": "rope"},
    "downsample_args": {"downsample_factor": 4},
}


def make_voxtral_realtime(out, prefix=REALTIME_PREFIX):
    """Voxtral Mini 4B Realtime's layout (VoxtralRealtimeGeneration in
    Mistral's format, the only one vLLM 0.32 loads it in: adapt_config_dict
    names it so for a causal encoder, transformers_utils/configs/mistral.py:
    235-245), tiny, from transformers' own
    VoxtralRealtimeForConditionalGeneration: a Mistral text model with
    ada_rms_norm_t_cond in each layer (params.json's ada_rms_norm_t_cond
    and its width, 32 as transformers fixes it), its embedding tied and
    named as the release names it, the causal encoder and the adapter
    under mm_streams_embeddings.embedding_module.; q and k rows of the
    text model in Mistral's rotary order, and of the encoder too (its rope
    interleaved, is_neox_style=False: whisper_causal.py:499, where
    transformers' rotates halves), the q bias with them; tekken.json with
    a streaming audio config.  prefix in place of
    mm_streams_embeddings.embedding_module.: make_voxtral_realtime_whisper."""
    import torch
    import transformers
    a = REALTIME_AUDIO["encoder_args"]
    ds = REALTIME_AUDIO["downsample_args"]["downsample_factor"]
    p = dict(DENSE_PARAMS, tied_embeddings=True, ada_rms_norm_t_cond=True,
             ada_rms_norm_t_cond_dim=32, multimodal={"whisper_model_args": REALTIME_AUDIO})
    cfg = transformers.VoxtralRealtimeConfig(
        downsample_factor=ds, tie_word_embeddings=True,
        text_config=dict(
            hidden_size=p["dim"], num_hidden_layers=p["n_layers"], head_dim=p["head_dim"],
            intermediate_size=p["hidden_dim"], num_attention_heads=p["n_heads"],
            num_key_value_heads=p["n_kv_heads"], vocab_size=p["vocab_size"],
            rms_norm_eps=p["norm_eps"], max_position_embeddings=p["max_position_embeddings"],
            sliding_window=None),
        audio_config=dict(
            hidden_size=a["dim"], intermediate_size=a["hidden_dim"],
            num_hidden_layers=a["n_layers"], num_attention_heads=a["n_heads"],
            head_dim=a["head_dim"], sliding_window=a["sliding_window"],
            num_mel_bins=a["audio_encoding_args"]["num_mel_bins"]))
    torch.manual_seed(1234)
    model = transformers.VoxtralRealtimeForConditionalGeneration(cfg).to(torch.bfloat16)
    perturb(model)
    tensors = {}
    for text, n, t in hf_mm_tensors(model, "audio_tower", p):
        if text:
            if n.startswith("lm_head."):
                continue
            n = mistral_name(n, REALTIME_TEXT_NAMES)
            if n.startswith("tok_embeddings."):
                n = prefix + n
            tensors[n] = t
            continue
        if re.match(r"audio_tower\.layers\.\d+\.self_attn\.[qk]_proj\.", n):
            t = interleave_heads(t.unsqueeze(-1), a["n_heads"]).squeeze(-1) if t.dim() == 1 \
                else interleave_heads(t, a["n_heads"])
        tensors[prefix + mistral_name(n, REALTIME_NAMES)] = t
    save_consolidated(out, tensors, p, 1)
    write_tekken(out, p["vocab_size"], audio={
        "sampling_rate": 16000, "frame_rate": 12.5,
        "audio_encoding_config": {k: a["audio_encoding_args"][k]
                                  for k in ("num_mel_bins", "hop_length", "window_size")},
        "transcription_format": "streaming", "transcription_delay_ms": 480,
        "streaming_look_ahead_ms": 2.5, "streaming_look_back_ms": 52.5,
        "streaming_n_left_pad_tokens": 32})


def make_voxtral_realtime_whisper(out):
    """The same under mm_whisper_embeddings., Voxtral's prefix, which vLLM's
    load_weights takes for either model (voxtral.py:496-499, :522-532)."""
    make_voxtral_realtime(out, "mm_whisper_embeddings.")
