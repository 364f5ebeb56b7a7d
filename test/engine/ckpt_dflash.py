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


def make(out, layers=2):
    import torch
    import torch.nn as nn
    import transformers
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer, Qwen3RMSNorm
    from make_ckpt import COMMON
    cfg = transformers.Qwen3Config(**dict(COMMON, num_hidden_layers=layers))
    h = cfg.hidden_size
    torch.manual_seed(2468)
    mods = {f"layers.{i}": Qwen3DecoderLayer(cfg, layer_idx=i) for i in range(layers)}
    mods.update({"fc": nn.Linear(len(TARGET_LAYER_IDS) * h, h, bias=False),
                 "hidden_norm": Qwen3RMSNorm(h, cfg.rms_norm_eps),
                 "norm": Qwen3RMSNorm(h, cfg.rms_norm_eps)})
    def damp(name, p):
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            p.mul_(DAMP)
    tensors = module_tensors(mods, damp)
    save_draft(out, tensors, draft_config(
        cfg, architectures=["DFlashDraftModel"], block_size=16,
        num_target_layers=COMMON["num_hidden_layers"], tie_word_embeddings=False,
        dflash_config={"target_layer_ids": TARGET_LAYER_IDS,
                       "mask_token_id": MASK_TOKEN_ID}))

