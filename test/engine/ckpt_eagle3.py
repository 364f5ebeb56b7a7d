"""An EAGLE-3 speculative draft for make_ckpt.py's llama target, laid out
as EAGLE-3's own releases ship one (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B):
config.json a LlamaConfig with architectures ["LlamaForCausalLMEagle3"],
one decoder layer and draft_vocab_size; the tensors

    midlayer.*         one Llama decoder layer whose q, k and v take
                       2*hidden_size (the token's embedding and the
                       hidden state side by side), with hidden_norm
    fc.weight          [hidden, 3*hidden]: the target's three auxiliary
                       hidden states projected to one
    norm.weight        the final norm
    lm_head.weight     [draft_vocab_size, hidden]
    d2t                I64 [draft_vocab_size]: draft token i is target
                       token i + d2t[i]
    t2d                BOOL [vocab_size]: which target tokens the draft has

and no embedding (the draft takes the target's).  The weights are
transformers' own LlamaDecoderLayer, LlamaRMSNorm and nn.Linear, the
q/k/v projections made 2*hidden wide as EAGLE-3's are.  Its sizes are the
target's (make_ckpt.COMMON); the draft's vocabulary is 200 of the
target's 1000 tokens (the releases: 32000 of 128256), not a multiple of
64, so that vLLM pads its head.  The target has 2 layers, fewer than the
default auxiliary layers (2, L/2, L-3) assume: config.json names them
(eagle_aux_hidden_state_layer_ids), as the releases for other targets
do.  The head's rows for LIKELY are scaled up (below).  make(out)
writes the draft into OUT."""
import json
import os

from ckpt_eagle import target_tensors
from ckpt_io import draft_config, module_tensors, save_draft

DRAFT_VOCAB = 200
# Tokens the llama target repeats in its greedy answers to oracle.py's
# prompts: their rows of the draft's head are made 20 times the others',
# so that the draft proposes them often and the target accepts some; the
# oracle compares the counts of accepted tokens, which a head cut or
# mapped (d2t) otherwise than vLLM's changes.
LIKELY = [167, 838, 931]


def tensors_of(cfg, qwen3=False, likely=LIKELY, boost=20, deepseek=False, aux=3):
    """The draft's tensors (EAGLE-3's own names) for LlamaConfig cfg (or,
    with qwen3, Qwen3Config cfg: a Qwen3 decoder layer with q/k norms; with
    deepseek, DeepseekV2Config cfg: a DeepSeek layer with MLA and a dense
    MLP)."""
    import torch
    import torch.nn as nn
    if qwen3:
        from transformers.models.qwen3.modeling_qwen3 import (
            Qwen3DecoderLayer as LlamaDecoderLayer, Qwen3RMSNorm as LlamaRMSNorm)
    else:
        from transformers.models.llama.modeling_llama import (LlamaDecoderLayer,
                                                              LlamaRMSNorm)
    LIKELY = likely
    h = cfg.hidden_size
    hd = getattr(cfg, "head_dim", None)
    torch.manual_seed(4321)
    if deepseek:
        from transformers.models.deepseek_v2.modeling_deepseek_v2 import (
            DeepseekV2DecoderLayer, DeepseekV2RMSNorm as LlamaRMSNorm)
        # layer 0 < first_k_dense_replace: a dense MLP, as vLLM's always is
        layer = DeepseekV2DecoderLayer(cfg, layer_idx=0)
        # its MLA's down-projections read [embedding, hidden state]
        att = layer.self_attn
        att.q_a_proj = nn.Linear(2 * h, cfg.q_lora_rank, bias=False)
        att.kv_a_proj_with_mqa = nn.Linear(
            2 * h, cfg.kv_lora_rank + cfg.qk_rope_head_dim, bias=False)
    else:
        layer = LlamaDecoderLayer(cfg, layer_idx=0)
        # EAGLE-3's first (only) layer reads [embedding, hidden state]
        att = layer.self_attn
        att.q_proj = nn.Linear(2 * h, cfg.num_attention_heads * hd, bias=False)
        att.k_proj = nn.Linear(2 * h, cfg.num_key_value_heads * hd, bias=False)
        att.v_proj = nn.Linear(2 * h, cfg.num_key_value_heads * hd, bias=False)
    mods = {"midlayer": layer, "midlayer.hidden_norm": LlamaRMSNorm(h, cfg.rms_norm_eps),
            "fc": nn.Linear(aux * h, h, bias=False),
            "norm": LlamaRMSNorm(h, cfg.rms_norm_eps),
            "lm_head": nn.Linear(h, DRAFT_VOCAB, bias=False)}
    tensors = module_tensors(mods)
    # the draft's tokens: target ids in increasing order (the releases
    # take the most frequent ones, then sort them), LIKELY among them
    rest = [i for i in torch.randperm(cfg.vocab_size).tolist() if i not in LIKELY]
    ids = torch.sort(torch.tensor(LIKELY + rest[:DRAFT_VOCAB - len(LIKELY)])).values
    with torch.no_grad():
        for t in LIKELY:
            tensors["lm_head.weight"][(ids == t).nonzero().item()] *= boost
    tensors["d2t"] = (ids - torch.arange(DRAFT_VOCAB)).to(torch.int64)
    t2d = torch.zeros(cfg.vocab_size, dtype=torch.bool)
    t2d[ids] = True
    tensors["t2d"] = t2d
    return tensors


def make(out, arch="LlamaForCausalLMEagle3", likely=LIKELY, boost=20):
    import transformers
    from make_ckpt import COMMON
    cfg = transformers.LlamaConfig(**dict(COMMON, num_hidden_layers=1))
    tensors = tensors_of(cfg, likely=likely, boost=boost)
    save_draft(out, tensors, draft_config(
        cfg, architectures=[arch], draft_vocab_size=DRAFT_VOCAB,
        eagle_aux_hidden_state_layer_ids=[0, 1, 2],
        tie_word_embeddings=False))


def make_qwen3vl(out):
    """The llama draft of make() for make_ckpt.py's qwen3_vl target, its
    config.json naming Eagle3Qwen3vlForCausalLM: an alias vLLM 0.32 builds
    as Eagle3LlamaForCausalLM (registry.py), as Eagle3Qwen2_5vlForCausalLM
    and Eagle3MiniMaxM2ForCausalLM are."""
    make(out, "Eagle3Qwen3vlForCausalLM", likely=QWEN3VL_LIKELY, boost=QWEN3VL_BOOST)


# The qwen3_vl target's token that its greedy answer to oracle.py's last
# prompt repeats; its head row scaled as QWEN3_LIKELY's (below).
QWEN3VL_LIKELY = [133]
QWEN3VL_BOOST = 20


# The qwen3 target's (make_ckpt.py's qwen3, tied) token that its greedy
# answer to oracle.py's first prompt repeats, as LIKELY for llama's; its
# head row negated and scaled (the draft's hidden states point away from
# it), so that the target accepts some of the draft's tokens (3 of 18).
QWEN3_LIKELY = [339]
QWEN3_BOOST = -20


def make_qwen3(out):
    """An EAGLE-3 draft for make_ckpt.py's qwen3 target with a Qwen3
    decoder layer (vLLM's Eagle3Qwen3ForCausalLM, qwen3_eagle3.py): the
    tensors of tensors_of with the layer's q_norm and k_norm, config.json a
    Qwen3Config whose architectures name Eagle3Qwen3ForCausalLM (vLLM keeps
    a name that starts with Eagle3; a plain Qwen3ForCausalLM it renames so)."""
    import transformers
    from make_ckpt import COMMON
    cfg = transformers.Qwen3Config(**dict(COMMON, num_hidden_layers=1))
    tensors = tensors_of(cfg, qwen3=True, likely=QWEN3_LIKELY, boost=QWEN3_BOOST)
    save_draft(out, tensors, draft_config(
        cfg, architectures=["Eagle3Qwen3ForCausalLM"], draft_vocab_size=DRAFT_VOCAB,
        eagle_aux_hidden_state_layer_ids=[0, 1, 2],
        tie_word_embeddings=False))


def make_peagle(out):
    """A P-EAGLE draft (parallel drafting) in the speculators format
    (speculators_model_type peagle: vLLM 0.32 builds PeagleLlamaForCausalLM,
    its Eagle3LlamaForCausalLM, with speculative_config parallel_drafting,
    transformers_utils/configs/speculators/algos.py update_peagle): make_
    speculators' draft with mask_token_id, two speculative tokens, and
    mask_hidden [1, 3*hidden], the auxiliary hidden states of a masked slot,
    which vLLM copies into a buffer of the draft (llama_eagle3.py
    load_weights) that its state does not hold."""
    import torch
    make_speculators(out, peagle=True)
    from safetensors.torch import load_file, save_file
    path = os.path.join(out, "model.safetensors")
    tensors = load_file(path)
    g = torch.Generator().manual_seed(77)
    h = tensors["fc.weight"].shape[1]
    tensors["mask_hidden"] = torch.randn(1, h, generator=g).to(torch.bfloat16)
    save_file(tensors, path, metadata={"format": "pt"})


def make_speculators(out, peagle=False):
    """The same draft in the speculators format (vllm-project/speculators'
    Eagle3DraftModel, as RedHatAI's *-speculator.eagle3 releases ship it):
    config.json with speculators_model_type eagle3, architectures
    ["Eagle3Speculator"], the layer's sizes under transformer_layer_config,
    speculators_config naming the verifier; the layer under layers.0. for
    midlayer., and the verifier's embedding as embed_tokens.weight (the
    llama target's, made again here)."""
    import transformers
    import make_ckpt
    cfg = transformers.LlamaConfig(**dict(make_ckpt.COMMON, num_hidden_layers=1))
    tensors = {("layers.0." + k[len("midlayer."):] if k.startswith("midlayer.") else k): v
               for k, v in tensors_of(cfg).items()}
    tensors["embed_tokens.weight"] = \
        target_tensors("llama", "model.embed_tokens.weight")["model.embed_tokens.weight"]
    layer = cfg.to_diff_dict()
    for k in ("transformers_version", "architectures", "dtype", "torch_dtype"):
        layer.pop(k, None)
    layer.update(model_type="llama", torch_dtype="bfloat16")
    c = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
         "draft_vocab_size": DRAFT_VOCAB, "norm_before_residual": False,
         "eagle_aux_hidden_state_layer_ids": [0, 1, 2], "embed_requires_grad": False,
         "target_hidden_size": None, "torch_dtype": "bfloat16",
         "transformer_layer_config": layer,
         "speculators_config": {
             "algorithm": "eagle3", "default_proposal_method": "greedy",
             "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 1,
                                   "accept_tolerance": 0.0, "verifier_accept_k": 1}],
             "verifier": {"architectures": ["LlamaForCausalLM"], "name_or_path": "llama"}}}
    if peagle:
        c.update(architectures=["PEagleDraftModel"], speculators_model_type="peagle",
                 mask_token_id=PEAGLE_MASK, norm_before_residual=False)
        c["speculators_config"]["algorithm"] = "peagle"
        c["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = 2
    save_draft(out, tensors, c)


# P-EAGLE's mask token (a token of the target's vocabulary the prompts do
# not use)
PEAGLE_MASK = 998


# The deepseek_v3 target's token that its greedy answers repeat; its head
# row scaled as LIKELY's.
DEEPSEEK_LIKELY = [656]
DEEPSEEK_BOOST = -20


def make_deepseek(out):
    """An EAGLE-3 draft for make_ckpt.py's deepseek_v3 target with a
    DeepSeek MLA decoder layer (vLLM's Eagle3DeepseekV2ForCausalLM,
    deepseek_eagle3.py): MLA with the target's sizes (q_a_proj and
    kv_a_proj_with_mqa reading 2*hidden_size) and a dense MLP, from
    transformers' DeepseekV2DecoderLayer.  config.json is a
    DeepseekV2Config naming Eagle3DeepseekV2ForCausalLM: vLLM 0.32 turns
    any draft config of model_type deepseek_v3 into its MTP draft
    (config/speculative.py hf_config_override: DeepSeekMTPModel, which
    method eagle3 makes the unknown Eagle3DeepSeekMTPModel)."""
    import transformers
    from make_ckpt import COMMON, MLA
    cfg = transformers.DeepseekV2Config(**dict(COMMON, **dict(
        MLA, num_hidden_layers=1, first_k_dense_replace=1)))
    tensors = tensors_of(cfg, deepseek=True, likely=DEEPSEEK_LIKELY, boost=DEEPSEEK_BOOST,
                         aux=2)
    # vLLM's DeepSeek target returns no auxiliary state for layer 0 (its
    # residual is None there: "unsupported operand type(s) for +"), and
    # the draft counts its fc's inputs from num_aux_hidden_states (or
    # eagle_config's layer ids; else 3): the target's 2 layers give 2
    save_draft(out, tensors, draft_config(
        cfg, architectures=["Eagle3DeepseekV2ForCausalLM"], draft_vocab_size=DRAFT_VOCAB,
        eagle_aux_hidden_state_layer_ids=[1, 2],
        num_aux_hidden_states=2, tie_word_embeddings=False))


def make_deepseek_eagle(out):
    """An EAGLE (EAGLE-1 layout) draft for make_ckpt.py's deepseek_v3
    target, as vLLM 0.32 builds it for method eagle from a DeepSeek-V3
    config (EagleDeepSeekMTPModel, deepseek_eagle.py): the target's own
    MTP layer (make_ckpt.py's add_mtp_layer, transformers' DeepSeek-V3
    layer perturbed) under EAGLE's names: its decoder layer as layers.0.,
    eh_proj as fc, enorm and hnorm, shared_head.norm as norm,
    shared_head.head as lm_head, its embed_tokens; config.json the
    target's with one layer and no MTP layer."""
    import shutil
    import tempfile
    from safetensors.torch import load_file
    import make_ckpt
    tmp = tempfile.mkdtemp()
    try:
        make_ckpt.make("deepseek_v3", os.path.join(tmp, "t"))
        src = {}
        for f in sorted(os.listdir(os.path.join(tmp, "t"))):
            if f.endswith(".safetensors"):
                src.update(load_file(os.path.join(tmp, "t", f)))
        with open(os.path.join(tmp, "t", "config.json")) as f:
            c = json.load(f)
    finally:
        shutil.rmtree(tmp)
    n = c["num_hidden_layers"]
    pre = f"model.layers.{n}."
    names = {"eh_proj.weight": "fc.weight", "enorm.weight": "enorm.weight",
             "hnorm.weight": "hnorm.weight", "shared_head.norm.weight": "norm.weight",
             "shared_head.head.weight": "lm_head.weight",
             "embed_tokens.weight": "embed_tokens.weight"}
    tensors = {}
    for k, v in src.items():
        if k.startswith(pre):
            rest = k[len(pre):]
            tensors[names.get(rest, "layers.0." + rest)] = v.contiguous()
    # the head's row for DEEPSEEK_LIKELY scaled as make_deepseek's, so
    # that the target accepts some of the draft's tokens
    for t in DEEPSEEK_LIKELY:
        tensors["lm_head.weight"][t] *= DEEPSEEK_BOOST
    c.pop("num_nextn_predict_layers", None)
    save_draft(out, tensors, dict(c, num_hidden_layers=1))
