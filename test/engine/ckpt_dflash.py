"""A DFlash speculative draft for make_ckpt.py's qwen3 target, laid out as
z-lab's releases ship one (z-lab/Qwen3-8B-DFlash-b16): config.json a
Qwen3Config with architectures ["DFlashDraftModel"], block_size and
dflash_config {"target_layer_ids", "mask_token_id"}; the tensors

    layers.N.*         Qwen3 decoder layers (q/k/v/o, q_norm/k_norm, the
                       MLP, both layer norms); their k and v also project
                       the target's context features
    fc.weight          [hidden, len(target_layer_ids)*hidden]: the
                       target's hidden states at target_layer_ids
                       projected to one
    hidden_norm.weight the norm after fc
    norm.weight        the final norm

and neither embedding nor head: the draft drafts with the target's (vLLM's
proposer shares them, has_own_embed_tokens/has_own_lm_head False).  The
weights are transformers' own Qwen3DecoderLayer, Qwen3RMSNorm and
nn.Linear, every parameter perturbed (norms not left at 1).  Sizes are
the target's (make_ckpt.COMMON), 2 draft layers (the releases: 5 to 8),
target_layer_ids both of the target's 2 layers; the mask token one of the
target's ordinary tokens, MASK_TOKEN_ID below (the releases: a token added
past the tokenizer's, 151669 for Qwen3).  make(out) writes the draft into
OUT."""

from ckpt_io import draft_config, module_tensors, save_draft

TARGET_LAYER_IDS = [0, 1]
# The mask token: the qwen3 target's (make_ckpt.py's qwen3, tied) token
# that its greedy answer to oracle.py's first prompt repeats, and the
# layers' outputs (o_proj, down_proj) scaled by DAMP, so that the masked
# slot's hidden state stays near that token's embedding and the draft
# proposes it often: the target accepts some (the oracle compares the
# accepted counts, which a draft cut otherwise than vLLM's changes).
MASK_TOKEN_ID = 339
DAMP = 0.1


def damp(name, p):
    """Scales a layer's output projections (o_proj, down_proj) by DAMP."""
    if name.endswith(("o_proj.weight", "down_proj.weight")):
        p.mul_(DAMP)


def qwen3_draft(layers, seed):
    """The qwen3 target's DFlash draft as make and the drafts built on it
    have it: (cfg, mods), cfg the Qwen3Config (make_ckpt.COMMON, LAYERS
    layers) and mods {prefix: module} of transformers' own modules,
    layers.N (Qwen3DecoderLayer), fc, hidden_norm and norm, made in that
    order after torch's generator is seeded with SEED."""
    import torch
    import torch.nn as nn
    import transformers
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer, Qwen3RMSNorm
    from make_ckpt import COMMON
    cfg = transformers.Qwen3Config(**dict(COMMON, num_hidden_layers=layers))
    h = cfg.hidden_size
    torch.manual_seed(seed)
    mods = {f"layers.{i}": Qwen3DecoderLayer(cfg, layer_idx=i) for i in range(layers)}
    mods.update({"fc": nn.Linear(len(TARGET_LAYER_IDS) * h, h, bias=False),
                 "hidden_norm": Qwen3RMSNorm(h, cfg.rms_norm_eps),
                 "norm": Qwen3RMSNorm(h, cfg.rms_norm_eps)})
    return cfg, mods


def add_convs(mods, layers, h, taps, group):
    """Adds DFlash2's grouped convolutions to each of LAYERS layers of mods
    (layers.N.attention_conv and layers.N.mlp_conv: base_kernel [2, taps,
    h], its first tap 1, and kernel_projection, zeros), under vLLM's names
    (no transformers class has them)."""
    import torch
    import torch.nn as nn
    for i in range(layers):
        for conv in ("attention_conv", "mlp_conv"):
            m = nn.Module()
            m.base_kernel = nn.Parameter(torch.zeros(2, taps, h))
            m.base_kernel.data[:, 0] = 1
            m.kernel_projection = nn.Linear(h, 2 * taps * (h // group), bias=False)
            m.kernel_projection.weight.data.zero_()
            mods[f"layers.{i}.{conv}"] = m


def make(out, layers=2):
    from make_ckpt import COMMON
    cfg, mods = qwen3_draft(layers, 2468)
    tensors = module_tensors(mods, damp)
    save_draft(out, tensors, draft_config(
        cfg, architectures=["DFlashDraftModel"], block_size=16,
        num_target_layers=COMMON["num_hidden_layers"], tie_word_embeddings=False,
        dflash_config={"target_layer_ids": TARGET_LAYER_IDS,
                       "mask_token_id": MASK_TOKEN_ID}))



def make_muse_glimmer(out, layers=2):
    """Muse Glimmer's DFlash draft for make_ckpt.py's muse_glimmer target, as
    meta-models/Muse-Glimmer-30B-assistant lays it out: transformers' own
    MuseGlimmerAssistantModel (config.json its MuseGlimmerAssistantConfig,
    architectures ["MuseGlimmerAssistantModel"], target_layer_ids,
    mask_token_id and block_size at the top, layer_types sliding), saved
    whole: layers.N.* (Qwen3's layer: q/k/v/o, q_norm/k_norm, the MLP, two
    norms), norm, and the context projection under encoder.fc and
    encoder.output_norm_enc (DFlash's fc and hidden_norm); no embedding or
    head.  Sizes are the target's text model's (256 wide, window 64), two
    layers; target_layer_ids two of the target's four; vocab_size written
    (the release omits it, and vLLM's MuseGlimmerAssistantConfig takes
    Muse Glimmer's 202048: here the target's 1000); the mask token and
    damping as make's (vLLM 0.32 runs no DFlash draft beside this target:
    bytes only, see wshard-families(7))."""
    import torch
    import transformers
    from make_ckpt import COMMON
    cfg = transformers.MuseGlimmerAssistantConfig(
        hidden_size=COMMON["hidden_size"], intermediate_size=COMMON["intermediate_size"],
        num_hidden_layers=layers, num_attention_heads=COMMON["num_attention_heads"],
        num_key_value_heads=COMMON["num_key_value_heads"], head_dim=COMMON["head_dim"],
        max_position_embeddings=COMMON["max_position_embeddings"], sliding_window=64,
        bos_token_id=2, eos_token_id=1, pad_token_id=0, block_size=16,
        mask_token_id=MG_MASK_TOKEN_ID, target_layer_ids=MG_TARGET_LAYER_IDS)
    torch.manual_seed(1357)
    model = transformers.MuseGlimmerAssistantModel(cfg)
    tensors = module_tensors({"": model}, damp)
    tensors = {k.lstrip("."): v for k, v in tensors.items()}
    c = draft_config(cfg, architectures=["MuseGlimmerAssistantModel"],
                     vocab_size=COMMON["vocab_size"])
    save_draft(out, tensors, c)


MG_TARGET_LAYER_IDS = [1, 3]
MG_MASK_TOKEN_ID = 339


def make_dflash2(out, layers=2):
    """A DFlash2 draft (vLLM's DFlash2DraftModel, qwen3_dflash2.py) for
    make_ckpt.py's qwen3 target: make's DFlash draft with, in each layer, a
    grouped convolution around the attention and one around the MLP
    (layers.N.attention_conv.* and layers.N.mlp_conv.*: base_kernel [2,
    conv_kernel_size, hidden] and kernel_projection [2 * conv_kernel_size *
    hidden / conv_group_size, hidden]) and a low-rank candidate selector
    (candidate_selector.predecessor_codebook and successor_codebook [vocab,
    selector_rank], hidden_projection [selector_rank, hidden]), under the
    names vLLM gives them (no transformers class has them), the sizes in
    dflash_config as vLLM's speculators converter writes them.  Each
    convolution starts near the identity (its first tap's base_kernel 1),
    so that the draft proposes as make's does."""
    import torch
    import torch.nn as nn
    from make_ckpt import COMMON
    taps, group, rank = 3, 64, 16
    cfg, mods = qwen3_draft(layers, 2469)
    h, v = cfg.hidden_size, cfg.vocab_size
    add_convs(mods, layers, h, taps, group)
    sel = nn.Module()
    sel.predecessor_codebook = nn.Parameter(torch.zeros(v, rank))
    sel.successor_codebook = nn.Parameter(torch.zeros(v, rank))
    sel.hidden_projection = nn.Linear(h, rank, bias=False)
    mods["candidate_selector"] = sel
    tensors = module_tensors(mods, damp)
    save_draft(out, tensors, draft_config(
        cfg, architectures=["DFlash2DraftModel"], block_size=16,
        num_target_layers=COMMON["num_hidden_layers"], tie_word_embeddings=False,
        dflash_config={"target_layer_ids": TARGET_LAYER_IDS, "mask_token_id": MASK_TOKEN_ID,
                       "conv_kernel_size": taps, "conv_group_size": group,
                       "selector_rank": rank, "selector_top_k": 4}))


DSPARK_RANK = 16


def dspark_heads(mods, h, v, r):
    """DSpark's Markov head (rank r, zeros) and confidence head (over the
    hidden state and the Markov rank), added to mods."""
    import torch.nn as nn
    markov = nn.Module()
    markov.markov_w1 = nn.Embedding(v, r)
    markov.markov_w2 = nn.Linear(r, v, bias=False)
    markov.markov_w1.weight.data.zero_()
    markov.markov_w2.weight.data.zero_()
    mods["markov_head"] = markov
    conf = nn.Module()
    conf.proj = nn.Linear(h + r, 1, bias=True)
    mods["confidence_head"] = conf


def make_dspark(out, layers=2):
    """A DSpark draft (vLLM's Qwen3DSparkModel, qwen3_dspark.py) for
    make_ckpt.py's qwen3 target, laid out as deepseek-ai's dense releases
    (deepseek-ai/dspark_qwen3_8b_block7): make's DFlash draft (layers.N.*,
    fc, hidden_norm, norm; no embedding or head: the target's serve) with
    the sequential Markov head, markov_head.markov_w1 and markov_w2 [vocab,
    markov_rank] (an nn.Embedding and a ParallelLMHead in vLLM), and the
    confidence head, confidence_head.proj [1, hidden + markov_rank] with
    its bias [1] (enable_confidence_head, confidence_head_with_markov),
    under the names vLLM's Qwen3DSparkForCausalLM loads (no transformers
    class has them); config.json a Qwen3Config with architectures
    ["Qwen3DSparkModel"], markov_rank, block_size and dflash_config as
    DFlash's.  The Markov tables start near zero (0.02 noise), so that the
    draft proposes as make's does."""
    from make_ckpt import COMMON
    cfg, mods = qwen3_draft(layers, 2470)
    h, v, r = cfg.hidden_size, cfg.vocab_size, DSPARK_RANK
    dspark_heads(mods, h, v, r)
    tensors = module_tensors(mods, damp)
    save_draft(out, tensors, draft_config(
        cfg, architectures=["Qwen3DSparkModel"], block_size=8,
        num_target_layers=COMMON["num_hidden_layers"], tie_word_embeddings=False,
        markov_rank=r, markov_head_type="vanilla", enable_confidence_head=True,
        confidence_head_with_markov=True,
        dflash_config={"target_layer_ids": TARGET_LAYER_IDS,
                       "mask_token_id": MASK_TOKEN_ID}))


GEMMA4_TARGET_LAYER_IDS = [1, 3]


def make_gemma4_dspark(out, layers=2):
    """A Gemma 4 DSpark draft (vLLM's Gemma4DSparkModel, gemma4_dspark.py)
    for make_ckpt.py's gemma4_mm target, a self-contained checkpoint as
    vLLM's Gemma4DSparkForCausalLM loads one: config.json a
    Gemma4TextConfig (model_type gemma4_text) with architectures
    ["Gemma4DSparkModel"], target_layer_ids, markov_rank, block_size,
    mask_token_id; the tensors embed_tokens, lm_head (its own, which vLLM
    loads and then replaces with the target's), fc [hidden, 2*hidden], hidden_norm,
    norm, layers.N.* transformers' own Gemma4TextDecoderLayer (every layer
    full attention with k as v, attention_k_eq_v, as vLLM's fused context
    projection requires: q/k/o, q_norm/k_norm, the MLP, four norms,
    layer_scalar), and make_dspark's Markov and confidence heads.  Sizes
    are the target's text model's (256 wide, 4 heads), the heads those of
    its full layers (global_head_dim 128), 2 kv heads (tp 2 divides them:
    vLLM cuts k_proj by rows), 2 layers."""
    import torch
    import torch.nn as nn
    import transformers
    from transformers.models.gemma4.modeling_gemma4 import (Gemma4RMSNorm,
                                                            Gemma4TextDecoderLayer)
    from make_ckpt import COMMON
    cfg = transformers.Gemma4TextConfig(**dict(
        COMMON, num_hidden_layers=layers, layer_types=["full_attention"] * layers,
        attention_k_eq_v=True, num_global_key_value_heads=2, global_head_dim=128,
        hidden_size_per_layer_input=0, vocab_size_per_layer_input=0,
        enable_moe_block=False, num_kv_shared_layers=0))
    h, v, r = cfg.hidden_size, cfg.vocab_size, DSPARK_RANK
    torch.manual_seed(2471)
    mods = {f"layers.{i}": Gemma4TextDecoderLayer(cfg, i) for i in range(layers)}
    mods.update({"embed_tokens": nn.Embedding(v, h), "lm_head": nn.Linear(h, v, bias=False),
                 "fc": nn.Linear(len(GEMMA4_TARGET_LAYER_IDS) * h, h, bias=False),
                 "hidden_norm": Gemma4RMSNorm(h, cfg.rms_norm_eps),
                 "norm": Gemma4RMSNorm(h, cfg.rms_norm_eps)})
    dspark_heads(mods, h, v, r)
    tensors = module_tensors(mods, damp)
    for i in range(layers):
        # a buffer, which module_tensors leaves out
        tensors[f"layers.{i}.layer_scalar"] = torch.tensor([0.9 + 0.05 * i],
                                                           dtype=torch.bfloat16)
    c = draft_config(
        cfg, architectures=["Gemma4DSparkModel"], block_size=8,
        tie_word_embeddings=False, markov_rank=r, markov_head_type="vanilla",
        enable_confidence_head=True, confidence_head_with_markov=True,
        target_layer_ids=GEMMA4_TARGET_LAYER_IDS, mask_token_id=MASK_TOKEN_ID)
    c.pop("per_layer_config", None)
    c["global_head_dim"], c["num_global_key_value_heads"] = 128, 2
    save_draft(out, tensors, c)


LAGUNA_TARGET_LAYER_IDS = [0, 2]


def make_laguna(out, layers=2):
    """A DFlash draft for make_ckpt.py's laguna target (vLLM's
    DFlashLagunaForCausalLM, laguna_dflash.py), laid out as poolside's
    releases (poolside/Laguna-S-2.1-DFlash: config.json a LagunaConfig
    with architectures ["DFlashLagunaForCausalLM"], every layer
    sliding_attention and dense, draft_vocab_size, dflash_config) under
    the names vLLM's DFlashLagunaModel.load_weights looks up as they are
    (it renames nothing): layers.N.* transformers' own LagunaDecoderLayer
    with q, k and v stored fused as self_attn.qkv_proj (q rows, then k,
    then v), the per-head gate g_proj, q_norm/k_norm, a dense MLP;
    aux_hidden_norms.I (one RMSNorm a target layer in target_layer_ids),
    fc, hidden_norm, norm; no embedding or head (the target's serve).
    Sizes are the target's, 4 heads a layer."""
    import torch
    import torch.nn as nn
    import transformers
    from transformers.models.laguna.modeling_laguna import LagunaDecoderLayer, LagunaRMSNorm
    from make_ckpt import COMMON
    cfg = transformers.LagunaConfig(**dict(
        COMMON, num_hidden_layers=layers, layer_types=["sliding_attention"] * layers,
        mlp_layer_types=["dense"] * layers, num_attention_heads_per_layer=[4] * layers,
        gating=True, sliding_window=512, rms_norm_eps=1e-6, bos_token_id=1,
        eos_token_id=2, pad_token_id=0, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=128, shared_expert_intermediate_size=256))
    h = cfg.hidden_size
    torch.manual_seed(2470)
    mods = {f"layers.{i}": LagunaDecoderLayer(cfg, layer_idx=i) for i in range(layers)}
    mods.update({f"aux_hidden_norms.{i}": LagunaRMSNorm(h, cfg.rms_norm_eps)
                 for i in range(len(LAGUNA_TARGET_LAYER_IDS))})
    mods.update({"fc": nn.Linear(len(LAGUNA_TARGET_LAYER_IDS) * h, h, bias=False),
                 "hidden_norm": LagunaRMSNorm(h, cfg.rms_norm_eps),
                 "norm": LagunaRMSNorm(h, cfg.rms_norm_eps)})
    t = module_tensors(mods, damp)
    for i in range(layers):
        a = f"layers.{i}.self_attn."
        t[a + "qkv_proj.weight"] = torch.cat(
            [t.pop(a + x + "_proj.weight") for x in "qkv"]).contiguous()
    save_draft(out, t, draft_config(
        cfg, architectures=["DFlashLagunaForCausalLM"], block_size=16,
        draft_vocab_size=COMMON["vocab_size"], tie_word_embeddings=False,
        dflash_config={"target_layer_ids": LAGUNA_TARGET_LAYER_IDS,
                       "mask_token_id": MASK_TOKEN_ID}))


def make_lilicorr(out, layers=2):
    """A LiLiCorr draft (vLLM's LiLiCorrDraftModel, lilicorr.py) for
    make_ckpt.py's qwen3 target: make_dflash2's DFlash layers with their
    convolutions (no candidate selector: LiLiCorr is DFlashQwen3Model's)
    and the correlator head under lilicorr.*, no transformers class having
    one: a stand-in built from vLLM's own names and shapes (LiLiCorrHead,
    lilicorr.py:125-255) with torch's modules of those names: nn.Linear
    with bias for each ReplicatedLinear, the lattice attention torch's
    nn.MultiheadAttention (in_proj_weight, in_proj_bias, out_proj, as
    vLLM's LiLiCorrLatticeAttention names them), NemotronHMLP's up_proj and
    down_proj as two biased nn.Linear, torch's RMSNorm and LayerNorm; the
    learned slot and rank embeddings and attention biases as parameters.
    dflash_config carries the lilicorr_* sizes vLLM reads (the head as wide
    as the draft: no token_proj)."""
    import torch
    import torch.nn as nn
    from make_ckpt import COMMON
    taps, group, block = 3, 64, 16
    heads, ratio, fdim, topk, nlayers = 4, 2.0, 32, 4, 1
    cfg, mods = qwen3_draft(layers, 2470)
    h = cfg.hidden_size
    add_convs(mods, layers, h, taps, group)

    def mlp(inp, mid, outp):
        m = nn.Module()
        m.up_proj = nn.Linear(inp, mid)
        m.down_proj = nn.Linear(mid, outp)
        return m

    head = nn.Module()
    head.pass_hidden_proj = nn.Linear(h, h)
    head.feature_norm = nn.LayerNorm(5)
    head.feature_mlp = mlp(5, h, h)
    head.slot_embedding = nn.Parameter(torch.zeros(1, 1, block - 1, 1, h))
    head.rank_embedding = nn.Parameter(torch.zeros(1, 1, 1, topk, h))
    head.relative_slot_bias = nn.Parameter(torch.zeros(heads, 2 * block - 1))
    head.same_slot_bias = nn.Parameter(torch.zeros(heads))
    head.context_proj = nn.Linear(h, h)
    head.layers = nn.ModuleList()
    for _ in range(nlayers):
        lay = nn.Module()
        lay.attn_norm = nn.RMSNorm(h, eps=cfg.rms_norm_eps)
        lay.attn = nn.MultiheadAttention(h, heads, bias=True)
        lay.mlp_norm = nn.RMSNorm(h, eps=cfg.rms_norm_eps)
        lay.mlp = mlp(h, int(h * ratio), h)
        head.layers.append(lay)
    head.output_norm = nn.RMSNorm(h, eps=cfg.rms_norm_eps)
    head.anchor_norm = nn.RMSNorm(h, eps=cfg.rms_norm_eps)
    head.factor_input_proj = nn.Linear(3 * h, h)
    head.out_head = nn.Linear(h, fdim)
    head.in_head = nn.Linear(h, fdim)
    head.anchor_out_head = nn.Linear(h, fdim)
    mods["lilicorr"] = head
    tensors = module_tensors(mods, damp)
    save_draft(out, tensors, draft_config(
        cfg, architectures=["LiLiCorrDraftModel"], block_size=block,
        num_target_layers=COMMON["num_hidden_layers"], tie_word_embeddings=False,
        dflash_config={"target_layer_ids": TARGET_LAYER_IDS, "mask_token_id": MASK_TOKEN_ID,
                       "block_size": block, "conv_kernel_size": taps, "conv_group_size": group,
                       "lilicorr_enabled": True, "lilicorr_hidden_size": 0,
                       "lilicorr_candidate_topk": topk, "lilicorr_num_heads": heads,
                       "lilicorr_mlp_ratio": ratio, "lilicorr_factor_dim": fdim,
                       "lilicorr_vector_eps": 1e-6, "lilicorr_logit_scale": 10.0,
                       "lilicorr_num_layers": nlayers}))
