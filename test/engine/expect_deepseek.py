#!/usr/bin/env python3
"""The executable spec of what vLLM 0.32 keeps per tensor-parallel rank for
DeepSeek-V2/V3 (MLA, DeepseekV2ForCausalLM / DeepseekV3ForCausalLM, BF16 or
block-FP8), GLM-4.5 (Glm4MoeForCausalLM) and GPT-OSS (GptOssForCausalLM,
BF16 or MXFP4): builds each rank's state from the HuggingFace checkpoint by
the rules in DEEPSEEK-LAYOUT.md and GPTOSS-LAYOUT.md and compares
it byte for byte with the state vLLM itself dumped (oracle.py ref).

    expect_deepseek.py SRC TP DUMP     compare SRC's expected state with
                                        DUMP/model-rank-R.safetensors
    expect_deepseek.py SRC TP OUT --write
                                        write the expected state as a
                                        sharded_state folder: OUT/model-rank-
                                        R-part-0.safetensors and SRC's other
                                        files (config.json, ...), for
                                        oracle.py load

Exits 1 on any difference (names, dtypes, shapes or bytes).
"""
import json
import os
import re
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file

VOCAB_PAD = 64  # vLLM's DEFAULT_VOCAB_PADDING_SIZE


def load_source(src):
    idx = os.path.join(src, "model.safetensors.index.json")
    if os.path.exists(idx):
        files = sorted(set(json.load(open(idx))["weight_map"].values()))
    else:
        files = sorted(f for f in os.listdir(src) if f.endswith(".safetensors"))
    t = {}
    for fname in files:
        with safe_open(os.path.join(src, fname), framework="pt") as f:
            for k in f.keys():
                t[k] = f.get_tensor(k)
    return t


def rows(t, tp, r):
    """Contiguous row block r of tp (ColumnParallelLinear: output dim)."""
    n = t.shape[0]
    assert n % tp == 0, (list(t.shape), tp)
    return t[r * n // tp:(r + 1) * n // tp]


def cols(t, tp, r):
    """Contiguous column block r of tp (RowParallelLinear: input dim)."""
    n = t.shape[-1]
    assert n % tp == 0, (list(t.shape), tp)
    return t[..., r * n // tp:(r + 1) * n // tp]


def block_rows(scale, size, tp, r, block):
    """Rows of a [ceil(out/block), ceil(in/block)] weight_scale_inv that
    rank r keeps for an output split of SIZE rows (size/tp per rank, a
    whole number of blocks)."""
    per = size // tp
    assert per % block == 0, (size, tp, block)
    b = per // block
    return scale[r * b:(r + 1) * b]


def block_cols(scale, size, tp, r, block):
    per = size // tp
    assert per % block == 0, (size, tp, block)
    b = per // block
    return scale[..., r * b:(r + 1) * b]


def vocab(t, tp, r):
    """VocabParallelEmbedding / ParallelLMHead: the vocabulary padded to a
    multiple of 64, split in tp contiguous row blocks, padding rows zero."""
    v = t.shape[0]
    vp = -(-v // VOCAB_PAD) * VOCAB_PAD
    per = vp // tp
    out = torch.zeros((per,) + tuple(t.shape[1:]), dtype=t.dtype)
    lo, hi = r * per, min((r + 1) * per, v)
    if hi > lo:
        out[:hi - lo] = t[lo:hi]
    return out


class Spec:
    """Expected state of rank r of tp."""

    def __init__(self, src, tp, r):
        self.cfg = json.load(open(os.path.join(src, "config.json")))
        self.src = load_source(src)
        self.tp, self.r = tp, r
        q = self.cfg.get("quantization_config") or {}
        self.fp8 = q.get("quant_method") == "fp8"
        self.block = (q.get("weight_block_size") or [None])[0]
        self.dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16,
                      "float32": torch.float32}[
            self.cfg.get("dtype") or self.cfg.get("torch_dtype")]
        self.used = set()
        self.out = {}

    def get(self, name):
        self.used.add(name)
        return self.src[name]

    def has(self, name):
        return name in self.src

    # Building blocks -------------------------------------------------
    def replicate(self, out, name, scales=True):
        self.out[out] = self.get(name)
        if self.fp8 and scales and self.has(sname(name)):
            self.out[sname(out)] = self.get(sname(name))

    def row_split(self, out, name):
        w = self.get(name)
        self.out[out] = rows(w, self.tp, self.r)
        if self.fp8 and self.has(sname(name)):
            self.out[sname(out)] = block_rows(self.get(sname(name)), w.shape[0],
                                              self.tp, self.r, self.block)

    def col_split(self, out, name):
        w = self.get(name)
        self.out[out] = cols(w, self.tp, self.r)
        if self.fp8 and self.has(sname(name)):
            self.out[sname(out)] = block_cols(self.get(sname(name)), w.shape[1],
                                              self.tp, self.r, self.block)

    def merged_rows(self, out, names, split=True):
        """MergedColumnParallelLinear: each part cut to its row block r
        (or whole when split is False: disable_tp), then concatenated in
        order; FP8 block scales likewise, each part ceil(rows/block) scale
        rows."""
        ws = [self.get(n) for n in names]
        tp, r = (self.tp, self.r) if split else (1, 0)
        self.out[out] = torch.cat([rows(w, tp, r) for w in ws])
        if self.fp8 and self.has(sname(names[0])):
            parts = []
            for n, w in zip(names, ws):
                s = self.get(sname(n))
                if split:
                    parts.append(block_rows(s, w.shape[0], tp, r, self.block))
                else:
                    parts.append(s)
            self.out[sname(out)] = torch.cat(parts)

    def experts(self, out_pre, src_pre, n_exp):
        """FusedMoE: w13_weight [E, 2*I/tp, H] = per expert cat(gate rows
        r, up rows r); w2_weight [E, H, I/tp] = down cols r; FP8 block
        scales w13_weight_scale_inv / w2_weight_scale_inv cut the same way
        in blocks."""
        w13, w2, s13, s2 = [], [], [], []
        for e in range(n_exp):
            p = f"{src_pre}.{e}."
            g, u = self.get(p + "gate_proj.weight"), self.get(p + "up_proj.weight")
            d = self.get(p + "down_proj.weight")
            w13.append(torch.cat([rows(g, self.tp, self.r), rows(u, self.tp, self.r)]))
            w2.append(cols(d, self.tp, self.r))
            if self.fp8:
                s13.append(torch.cat([
                    block_rows(self.get(p + "gate_proj.weight_scale_inv"), g.shape[0], self.tp, self.r, self.block),
                    block_rows(self.get(p + "up_proj.weight_scale_inv"), u.shape[0], self.tp, self.r, self.block)]))
                s2.append(block_cols(self.get(p + "down_proj.weight_scale_inv"), d.shape[1], self.tp, self.r, self.block))
        self.out[out_pre + ".w13_weight"] = torch.stack(w13)
        self.out[out_pre + ".w2_weight"] = torch.stack(w2)
        if self.fp8:
            self.out[out_pre + ".w13_weight_scale_inv"] = torch.stack(s13)
            self.out[out_pre + ".w2_weight_scale_inv"] = torch.stack(s2)

    def qkv(self, out, src):
        """QKVParallelLinear OUT.qkv_proj from SRC.{q,k,v}_proj, weight and
        bias: q rows (h/tp heads), then k and v rows (kv/tp heads each;
        one kv head replicated per rank when kv < tp)."""
        kv, d = self.cfg["num_key_value_heads"], self.cfg["head_dim"]
        for kind in ("weight", "bias"):
            names = [f"{src}.{x}_proj.{kind}" for x in "qkv"]
            if not self.has(names[0]):
                continue
            parts = [rows(self.get(names[0]), self.tp, self.r)]
            for n in names[1:]:
                t = self.get(n)
                if kv >= self.tp:
                    parts.append(rows(t, self.tp, self.r))
                else:
                    g = self.r * kv // self.tp
                    parts.append(t[g * d:(g + 1) * d])
            self.out[f"{out}.qkv_proj.{kind}"] = torch.cat(parts)

    def attn_scales(self, pre, mla):
        """Buffers vLLM's attention layer creates itself: F32 scalars 1.0.
        With an FP8 quantization_config a (non-MLA) Attention layer also
        holds k_scale/v_scale/q_scale/prob_scale parameters, -1.0 in the
        model dtype (Fp8KVCacheMethod); MLAAttention does not (Fp8Config
        gives it no quant method: it is not an Attention)."""
        for s in ("k", "v", "q", "prob"):
            self.out[f"{pre}._{s}_scale"] = torch.tensor(1.0, dtype=torch.float32)
            if self.fp8 and not mla:
                self.out[f"{pre}.{s}_scale"] = torch.tensor(-1.0, dtype=self.dtype)

    def common(self):
        self.out["model.embed_tokens.weight"] = vocab(
            self.get("model.embed_tokens.weight"), self.tp, self.r)
        if self.cfg.get("tie_word_embeddings"):
            self.used.add("lm_head.weight")
        else:
            self.out["lm_head.weight"] = vocab(self.get("lm_head.weight"),
                                               self.tp, self.r)
        self.replicate("model.norm.weight", "model.norm.weight")

    def mlp(self, L):
        """Dense layers (n < first_k_dense_replace) and MoE layers."""
        c = self.cfg
        p = f"model.layers.{L}.mlp"
        if self.has(p + ".gate_proj.weight"):
            self.merged_rows(p + ".gate_up_proj.weight",
                             [p + ".gate_proj.weight", p + ".up_proj.weight"])
            self.col_split(p + ".down_proj.weight", p + ".down_proj.weight")
            return
        # MoE: the gate, the shared experts and the routed experts are all
        # reached through the FusedMoE module (mlp.experts) too, and the
        # sharded-state names are the lexicographically smallest aliases:
        # mlp.experts.gate, mlp.experts._shared_experts._layer.
        o = p + ".experts"
        b = p + ".gate.e_score_correction_bias"
        if c.get("model_type") == "glm4_moe":
            # GLM-4.5 does not hand its gate to FusedMoE: mlp.gate.weight
            # stays, in F32 (GateLinear params_dtype=torch.float32); the
            # bias is reached as experts.routed_experts.e_score_correction_bias
            # (smaller than mlp.gate.e_score_correction_bias), F32.
            self.out[p + ".gate.weight"] = self.get(p + ".gate.weight").to(torch.float32)
            self.out[o + ".routed_experts.e_score_correction_bias"] = \
                self.get(b).to(torch.float32)
        else:
            # DeepSeek hands its gate to FusedMoE (gate=): mlp.experts.gate,
            # in the model dtype; the bias only with topk_method noaux_tc,
            # F32, as mlp.experts.gate.e_score_correction_bias.
            self.out[o + ".gate.weight"] = self.get(p + ".gate.weight").to(self.dtype)
            if c.get("topk_method") == "noaux_tc":
                self.out[o + ".gate.e_score_correction_bias"] = \
                    self.get(b).to(torch.float32)
        if b in self.src and b not in self.used:
            self.used.add(b)  # ignored by vLLM
        if c.get("n_shared_experts"):
            sp = p + ".shared_experts"
            so = o + "._shared_experts._layer"
            self.merged_rows(so + ".gate_up_proj.weight",
                             [sp + ".gate_proj.weight", sp + ".up_proj.weight"])
            self.col_split(so + ".down_proj.weight", sp + ".down_proj.weight")
        self.experts(o + ".routed_experts", p + ".experts",
                     c["n_routed_experts"])

    def skip_mtp_layers(self):
        """The MTP layers (model.layers.{num_hidden_layers + i}), which the
        main model's load_weights skips: used, none of them kept."""
        n = self.cfg["num_hidden_layers"]
        for k in self.src:
            mt = re.match(r"model\.layers\.(\d+)\.", k)
            if mt and int(mt.group(1)) >= n:
                self.used.add(k)

    # Families ----------------------------------------------------------
    def deepseek(self):
        c = self.cfg
        self.common()
        for L in range(c["num_hidden_layers"]):
            p = f"model.layers.{L}"
            a = p + ".self_attn"
            m = a + ".mla_attn"
            self.replicate(p + ".input_layernorm.weight", p + ".input_layernorm.weight")
            self.replicate(p + ".post_attention_layernorm.weight",
                           p + ".post_attention_layernorm.weight")
            if c.get("q_lora_rank"):
                # ReplicatedLinear-like (MergedColumnParallelLinear with
                # disable_tp): q_a_proj rows then kv_a_proj_with_mqa rows.
                self.merged_rows(a + ".fused_qkv_a_proj.weight",
                                 [a + ".q_a_proj.weight",
                                  a + ".kv_a_proj_with_mqa.weight"], split=False)
                self.replicate(m + ".q_a_layernorm.weight", a + ".q_a_layernorm.weight")
                # heads x (qk_nope_head_dim + qk_rope_head_dim) rows
                self.row_split(m + ".q_b_proj.weight", a + ".q_b_proj.weight")
            else:
                self.replicate(a + ".kv_a_proj_with_mqa.weight",
                               a + ".kv_a_proj_with_mqa.weight")
                self.row_split(m + ".q_proj.weight", a + ".q_proj.weight")
            self.replicate(a + ".kv_a_layernorm.weight", a + ".kv_a_layernorm.weight")
            # heads x (qk_nope_head_dim + v_head_dim) rows
            self.row_split(a + ".kv_b_proj.weight", a + ".kv_b_proj.weight")
            # heads x v_head_dim columns
            self.col_split(m + ".o_proj.weight", a + ".o_proj.weight")
            self.attn_scales(m + ".mla_attn", mla=True)
            self.mlp(L)
        self.skip_mtp_layers()

    def glm4_moe(self):
        c = self.cfg
        self.common()
        for L in range(c["num_hidden_layers"]):
            p = f"model.layers.{L}"
            a = p + ".self_attn"
            self.replicate(p + ".input_layernorm.weight", p + ".input_layernorm.weight")
            self.replicate(p + ".post_attention_layernorm.weight",
                           p + ".post_attention_layernorm.weight")
            self.qkv(a, a)
            if c.get("use_qk_norm"):
                self.replicate(a + ".q_norm.weight", a + ".q_norm.weight")
                self.replicate(a + ".k_norm.weight", a + ".k_norm.weight")
            self.col_split(a + ".o_proj.weight", a + ".o_proj.weight")
            self.attn_scales(a + ".attn", mla=False)
            self.mlp(L)
        self.skip_mtp_layers()

    def gpt_oss_experts(self, out, src):
        """GPT-OSS's experts (GptOssModel._load_weights_other for BF16,
        _load_weights_mxfp4 for MXFP4, in gpt_oss.py): the intermediate
        dimension I cut in tp blocks of I/tp (gate and up stay interleaved,
        so w13 takes the 2*I/tp rows 2*lo..2*hi), the down bias whole on
        rank 0 and zero elsewhere.  BF16 is transposed from transformers'
        [E, H, 2I] / [E, I, H]; MXFP4 is kept as loaded (before
        process_weights_after_loading), its blocks viewed as bytes
        [E, rows, K/2] and cut in whole 32-value blocks."""
        c = self.cfg
        e, h, i = c["num_local_experts"], c["hidden_size"], c["intermediate_size"]
        per = i // self.tp
        assert i % self.tp == 0, (i, self.tp)
        lo, hi = self.r * per, (self.r + 1) * per
        if self.has(src + ".gate_up_proj_blocks"):
            # whole blocks per rank (vLLM pads an uneven last rank instead)
            assert per % 32 == 0, (i, self.tp)
            w = self.get(src + ".gate_up_proj_blocks").reshape(e, 2 * i, -1)
            self.out[out + ".w13_weight"] = w[:, 2 * lo:2 * hi]
            s = self.get(src + ".gate_up_proj_scales")
            self.out[out + ".w13_weight_scale"] = s[:, 2 * lo:2 * hi]
            w = self.get(src + ".down_proj_blocks").reshape(e, h, -1)
            self.out[out + ".w2_weight"] = w[..., lo // 2:hi // 2]
            s = self.get(src + ".down_proj_scales")
            self.out[out + ".w2_weight_scale"] = s[..., lo // 32:hi // 32]
        else:
            w = self.get(src + ".gate_up_proj")
            self.out[out + ".w13_weight"] = w[:, :, 2 * lo:2 * hi].transpose(1, 2)
            w = self.get(src + ".down_proj")
            self.out[out + ".w2_weight"] = w[:, lo:hi, :].transpose(1, 2)
        b = self.get(src + ".gate_up_proj_bias")
        self.out[out + ".w13_bias"] = b[:, 2 * lo:2 * hi]
        b = self.get(src + ".down_proj_bias")
        self.out[out + ".w2_bias"] = b if self.r == 0 else torch.zeros_like(b)

    def gpt_oss(self):
        """GptOssForCausalLM (gpt_oss.py): self_attn becomes attn, the
        embedding model.embedding; sinks split by heads; o_proj's bias and
        the router (weight and bias) whole on every rank."""
        c = self.cfg
        self.common()
        self.out["model.embedding.weight"] = self.out.pop("model.embed_tokens.weight")
        for L in range(c["num_hidden_layers"]):
            p = f"model.layers.{L}"
            a, s = p + ".attn", p + ".self_attn"
            for n in ("input_layernorm.weight", "post_attention_layernorm.weight",
                      "mlp.router.weight", "mlp.router.bias"):
                self.replicate(f"{p}.{n}", f"{p}.{n}")
            self.qkv(a, s)
            self.col_split(a + ".o_proj.weight", s + ".o_proj.weight")
            self.replicate(a + ".o_proj.bias", s + ".o_proj.bias")
            self.out[a + ".sinks"] = rows(self.get(s + ".sinks"), self.tp, self.r)
            self.attn_scales(a + ".attn", mla=False)
            self.gpt_oss_experts(p + ".mlp.experts.routed_experts", p + ".mlp.experts")

    def build(self):
        arch = self.cfg["architectures"][0]
        if arch in ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"):
            self.deepseek()
        elif arch == "Glm4MoeForCausalLM":
            self.glm4_moe()
        elif arch == "GptOssForCausalLM":
            self.gpt_oss()
        else:
            raise SystemExit(f"no spec for {arch}")
        unused = sorted(set(self.src) - self.used)
        return {k: v.contiguous() for k, v in self.out.items()}, unused


def sname(weight_name):
    return weight_name[:-len("weight")] + "weight_scale_inv"


def compare(src, tp, dump):
    bad = 0
    for r in range(tp):
        exp, unused = Spec(src, tp, r).build()
        if unused:
            print(f"rank {r}: source tensors the spec does not place: "
                  f"{unused[:8]}{' ...' if len(unused) > 8 else ''}")
            bad += 1
        got = {}
        with safe_open(os.path.join(dump, f"model-rank-{r}.safetensors"), "pt") as f:
            for k in f.keys():
                got[k] = f.get_tensor(k)
        for k in sorted(set(exp) | set(got)):
            if k not in got:
                print(f"rank {r}: {k}: expected, not in vLLM's state")
                bad += 1
            elif k not in exp:
                print(f"rank {r}: {k}: in vLLM's state ({got[k].dtype} "
                      f"{list(got[k].shape)}), not expected")
                bad += 1
            elif exp[k].dtype != got[k].dtype or exp[k].shape != got[k].shape:
                print(f"rank {r}: {k}: expected {exp[k].dtype} {list(exp[k].shape)}"
                      f", vLLM {got[k].dtype} {list(got[k].shape)}")
                bad += 1
            else:
                a = exp[k].reshape(-1).view(torch.uint8)
                b = got[k].contiguous().reshape(-1).view(torch.uint8)
                if not torch.equal(a, b):
                    print(f"rank {r}: {k}: {int((a != b).sum())} of {a.numel()} bytes differ")
                    bad += 1
        print(f"rank {r}: {len(got)} tensors in vLLM's state, {len(exp)} expected, "
              f"{'all identical' if not bad else 'DIFFERENCES'}")
    return 1 if bad else 0


def main(argv):
    if len(argv) == 4:
        return compare(argv[1], int(argv[2]), argv[3])
    if len(argv) == 5 and argv[4] == "--write":
        import shutil
        os.makedirs(argv[3], exist_ok=True)
        for f in os.listdir(argv[1]):
            if not f.endswith(".safetensors") and not f.endswith(".index.json"):
                shutil.copy(os.path.join(argv[1], f), argv[3])
        for r in range(int(argv[2])):
            exp, _ = Spec(argv[1], int(argv[2]), r).build()
            save_file(exp, os.path.join(argv[3], f"model-rank-{r}-part-0.safetensors"),
                      metadata={"format": "pt"})
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
