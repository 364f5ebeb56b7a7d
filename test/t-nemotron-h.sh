#!/bin/sh
# Nemotron-H at full size: a checkpoint with the dimensions of
# nvidia/Nemotron-H-8B-Base-8K (hidden 4096; 52 layers, the published
# pattern of 24 Mamba-2, 4 attention and 24 MLP layers; Mamba-2 128 heads
# of 64 in 8 groups of state 128, conv kernel 4; 32 heads and 8 kv heads
# of 128; MLP 21504; vocabulary 131072) and its tensor names and shapes,
# written sparse (16 GB of holes), planned with --dry-run at tp 1, 2, 4
# and 8; tp 16 refused (8 Mamba groups that 16 ranks cannot share, as vLLM
# refuses them: it replicates only a single group).  Then
# the MoE variant at the size of nvidia/Nemotron-3-Nano-30B-A3B (hidden
# 2688; 52 layers, 23 Mamba-2, 23 MoE and 6 attention; 128 relu^2 experts
# of 1856 and a shared one of 3712; 2 kv heads, replicated past tp 2) at
# tp 8 and with --expert-parallel.
# shellcheck disable=SC1091
. "$(dirname "$0")/lib.sh"

src=$T/nemotron-h
nano=$T/nemotron-3-nano
mkdir -p "$src" "$nano"
py_st "$src" "$nano" <<'PY' || fail "writing the sparse checkpoints failed"
import json, os, sys
import st


def nemotron_h(out, H, NH, KV, I, pattern, G=8, MH=128, E=0, SI=0):
    """A sparse Nemotron-H checkpoint: Mamba-2 (M) heads of 64, state 128,
    conv kernel 4; attention (*) heads of 128; MLP (-) or relu^2 MoE (E)
    of E experts of I and a shared expert of SI."""
    HD, V, MD, N, K = 128, 131072, 64, 128, 4
    cfg = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
           "hidden_size": H, "num_hidden_layers": len(pattern),
           "hybrid_override_pattern": pattern, "num_attention_heads": NH,
           "num_key_value_heads": KV, "head_dim": HD, "intermediate_size": I,
           "mamba_num_heads": MH, "mamba_head_dim": MD, "n_groups": G,
           "ssm_state_size": N, "conv_kernel": K, "expand": 2, "vocab_size": V,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    if E:
        cfg.update({"n_routed_experts": E, "num_experts_per_tok": 6, "moe_intermediate_size": I,
                    "moe_shared_expert_intermediate_size": SI, "n_shared_experts": 1,
                    "mlp_hidden_act": "relu2"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f)
    t = {"backbone.embeddings.weight": [V, H], "backbone.norm_f.weight": [H],
         "lm_head.weight": [V, H]}
    for n, kind in enumerate(pattern):
        p = "backbone.layers.%d." % n
        t[p + "norm.weight"] = [H]
        m = p + "mixer."
        if kind == "M":
            conv = MH * MD + 2 * G * N
            t.update({m + "A_log": [MH], m + "D": [MH], m + "dt_bias": [MH],
                      m + "conv1d.weight": [conv, 1, K], m + "conv1d.bias": [conv],
                      m + "in_proj.weight": [2 * MH * MD + 2 * G * N + MH, H],
                      m + "norm.weight": [MH * MD], m + "out_proj.weight": [H, MH * MD]})
        elif kind == "-":
            t.update({m + "up_proj.weight": [I, H], m + "down_proj.weight": [H, I]})
        elif kind == "E":
            t.update({m + "gate.weight": [E, H], m + "gate.e_score_correction_bias": [E],
                      m + "shared_experts.up_proj.weight": [SI, H],
                      m + "shared_experts.down_proj.weight": [H, SI]})
            for e in range(E):
                t.update({m + "experts.%d.up_proj.weight" % e: [I, H],
                          m + "experts.%d.down_proj.weight" % e: [H, I]})
        else:
            t.update({m + "q_proj.weight": [NH * HD, H], m + "k_proj.weight": [KV * HD, H],
                      m + "v_proj.weight": [KV * HD, H], m + "o_proj.weight": [H, NH * HD]})
    st.write_sparse(os.path.join(out, "model.safetensors"), t)


nemotron_h(sys.argv[1], 4096, 32, 8, 21504,
           "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-")
nemotron_h(sys.argv[2], 2688, 32, 2, 1856,
           "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", MH=64, E=128, SI=3712)
PY

M=model.layers.0.mixer
for tp in 1 2 4 8; do
	expect_exit 0 "$WSHARD" convert --dry-run --tp "$tp" "$src" "$T/dest" || continue
	cp "$T/out" "$T/plan-$tp"
	[ -e "$T/dest" ] && fail "tp $tp: --dry-run created OUT"
	# z, x, B, C and dt each cut: (8192 + 8192 + 1024 + 1024 + 128) / tp
	has $M.in_proj.weight "$tp" "[$((18560 / tp)), 4096]"
	has $M.conv1d.weight "$tp" "[$((10240 / tp)), 1, 4]"
	has $M.out_proj.weight "$tp" "[4096, $((8192 / tp))]"
	has $M.norm.weight "$tp" "[$((8192 / tp))]"
	grep -qF "  $M.A F32 [$((128 / tp))] " "$T/plan-$tp" ||
		fail "tp $tp: A is not F32 [$((128 / tp))]: $(grep -F "  $M.A " "$T/plan-$tp")"
	has model.layers.7.mixer.qkv_proj.weight "$tp" "[$((6144 / tp)), 4096]"
	has model.layers.1.mixer.up_proj.weight "$tp" "[$((21504 / tp)), 4096]"
done
expect_exit 3 "$WSHARD" convert --dry-run --tp 16 "$src" "$T/dest" &&
	err_has "tp 16" "holds n_groups=8 groups, neither 1 nor divisible by --tp 16" && one_line "tp 16"

src=$nano
M=model.layers.1.mixer
expect_exit 0 "$WSHARD" convert --dry-run --tp 8 "$src" "$T/dest" && cp "$T/out" "$T/plan-moe" && {
	# up_proj alone (relu^2 has no gate): [E, I/8, H]
	has $M.experts.routed_experts.w13_weight moe "[128, 232, 2688]"
	has $M.experts.routed_experts.w2_weight moe "[128, 2688, 232]"
	has $M.experts._shared_experts._layer.up_proj.weight moe "[464, 2688]"
	grep -qF "  $M.gate.weight F32 [128, 2688] " "$T/plan-moe" ||
		fail "MoE: the router is not F32 [128, 2688]"
	# 2 kv heads at tp 8: q by heads, k and v one head whole
	has model.layers.5.mixer.qkv_proj.weight moe "[768, 2688]"
}
expect_exit 0 "$WSHARD" convert --dry-run --tp 8 --expert-parallel "$src" "$T/dest" &&
	cp "$T/out" "$T/plan-ep" &&
	has $M.experts.routed_experts.w13_weight ep "[16, 1856, 2688]"
finish
