"""Step-3's text model (Step3TextForCausalLM, model_type "step3_text") as vLLM
0.32 reads it, tiny.  StepFun releases Step-3 as Step3VLForConditionalGeneration
(stepfun-ai/step3, step3-fp8), whose text tensors are these under the same
names (vLLM maps model. -> language_model.model., lm_head. ->
language_model.lm_head.); a text-only Step3TextForCausalLM checkpoint is
that text model saved alone.  vLLM reads its config with its own
Step3TextConfig (vllm/transformers_utils/configs/step3_vl.py), no remote
code.

transformers 5.19 has no Step-3 class.  The closest is Qwen2-MoE (a router,
experts stacked 3-D, a shared expert, dense layers by mlp_only_layers, one
kv head here); its weights are made by Qwen2MoeForCausalLM and rewritten
into Step-3's layout:

    mlp.experts.gate_up_proj [E, 2I, H] -> moe.gate_proj.weight [E, I, H] + moe.up_proj.weight [E, I, H]
    mlp.experts.down_proj    [E, H, I]  -> moe.down_proj.weight [E, H, I]
    mlp.gate.weight          [E, H]     -> moe.gate.weight
    mlp.shared_expert.*                 -> share_expert.*   (shared_expert_gate dropped)
    self_attn.k_proj, v_proj [hd, H]       (kept: one kv head)
    self_attn.q_proj [nh*hd, H]         -> its first share_q_dim rows: q_proj [share_q_dim, H]
    (added, seeded random: self_attn.inter_norm.weight [share_q_dim] around 1,
     self_attn.wq.weight [nh*hd, share_q_dim] -- Step-3's multi-query
     "MFA" attention: q = wq(inter_norm(q_proj(x))), one shared kv head)

Sizes: make_ckpt's COMMON (hidden 256, 4 heads of 64, vocab 1000,
intermediate 512) with share_q_dim 128, 3 layers: 0 dense, 1 and 2 MoE
(moe_layers_enum "1,2", a string as the release has it), 4 experts (top 2)
of 128 and a shared expert of 128.  No tokenizer.

    make(out)                the release's layout (stacked experts)
    make(out, per_expert=1)  the same values one tensor an expert
                             (moe.experts.E.{gate,up,down}_proj.weight): a
                             form vLLM's step3_text.py does NOT read (its
                             loader maps .gate_proj into gate_up_proj); kept
                             only for comparisons.
"""
import os

SHARE_Q = 128


def make(out, per_expert=False):
    import torch
    import transformers
    from ckpt_io import save_shards
    from make_ckpt import COMMON
    import json
    H, I, nh, hd, V = (COMMON["hidden_size"], COMMON["intermediate_size"],
                       COMMON["num_attention_heads"], COMMON["head_dim"], COMMON["vocab_size"])
    L, E, Im, S = 3, 4, 128, 128
    cfg = transformers.Qwen2MoeConfig(
        hidden_size=H, intermediate_size=I, num_hidden_layers=L, num_attention_heads=nh,
        num_key_value_heads=1, head_dim=hd, vocab_size=V, qkv_bias=False,
        moe_intermediate_size=Im, shared_expert_intermediate_size=S, num_experts=E,
        num_experts_per_tok=2, mlp_only_layers=[0], tie_word_embeddings=False,
        max_position_embeddings=COMMON["max_position_embeddings"])
    torch.manual_seed(1234)
    model = transformers.Qwen2MoeForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(4321)
    t = {k: sd[k] for k in ("model.embed_tokens.weight", "model.norm.weight", "lm_head.weight")}
    groups = [sorted(t)]
    for n in range(L):
        p = "model.layers.%d." % n
        lt = {p + "input_layernorm.weight": sd[p + "input_layernorm.weight"],
              p + "post_attention_layernorm.weight": sd[p + "post_attention_layernorm.weight"],
              p + "self_attn.q_proj.weight": sd[p + "self_attn.q_proj.weight"][:SHARE_Q].clone(),
              p + "self_attn.k_proj.weight": sd[p + "self_attn.k_proj.weight"],
              p + "self_attn.v_proj.weight": sd[p + "self_attn.v_proj.weight"],
              p + "self_attn.o_proj.weight": sd[p + "self_attn.o_proj.weight"],
              p + "self_attn.inter_norm.weight":
                  (1 + 0.02 * torch.randn(SHARE_Q, generator=g)).to(torch.bfloat16),
              p + "self_attn.wq.weight":
                  (0.02 * torch.randn(nh * hd, SHARE_Q, generator=g)).to(torch.bfloat16)}
        if n == 0:
            for w in ("gate_proj", "up_proj", "down_proj"):
                lt[p + "mlp.%s.weight" % w] = sd[p + "mlp.%s.weight" % w]
        else:
            gu, down = sd[p + "mlp.experts.gate_up_proj"], sd[p + "mlp.experts.down_proj"]
            lt[p + "moe.gate.weight"] = sd[p + "mlp.gate.weight"]
            stacks = {"gate_proj": gu[:, :Im], "up_proj": gu[:, Im:], "down_proj": down}
            for w, s in stacks.items():
                if per_expert:
                    for e in range(E):
                        lt[p + "moe.experts.%d.%s.weight" % (e, w)] = s[e].clone().contiguous()
                else:
                    lt[p + "moe.%s.weight" % w] = s.clone().contiguous()
            for w in ("gate_proj", "up_proj", "down_proj"):
                lt[p + "share_expert.%s.weight" % w] = sd[p + "mlp.shared_expert.%s.weight" % w]
        t.update(lt)
        groups.append(sorted(lt))
    os.makedirs(out, exist_ok=True)
    save_shards(out, t, groups)
    c = {"architectures": ["Step3TextForCausalLM"], "model_type": "step3_text",
         "hidden_size": H, "intermediate_size": I, "num_attention_heads": nh,
         "num_attention_groups": 1, "num_hidden_layers": L, "max_seq_len": 512,
         "vocab_size": V, "rms_norm_eps": 1e-05, "moe_intermediate_size": Im,
         "moe_num_experts": E, "moe_top_k": 2, "rope_theta": 500000,
         "rope_scaling": None, "max_position_embedding": 512, "share_expert_dim": S,
         "share_q_dim": SHARE_Q, "head_dim": hd, "norm_expert_weight": False,
         "moe_layers_enum": "1,2", "torch_dtype": "bfloat16", "bos_token_id": 0,
         "eos_token_id": 1}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)


if __name__ == "__main__":
    import sys
    make(sys.argv[1], per_expert=len(sys.argv) > 2 and sys.argv[2] == "per_expert")
