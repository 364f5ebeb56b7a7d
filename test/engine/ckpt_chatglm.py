"""ChatGLM2/3 and GLM-4 (ChatGLMModel, model_type "chatglm": THUDM's
chatglm2-6b, chatglm3-6b, glm-4-9b-chat as released with remote code, not
the -hf ones) as vLLM 0.32 reads them, tiny: transformers has no class of
this layout, so transformers' own GlmForCausalLM (the -hf conversion of the
same network: q/k/v with biases, no o_proj bias, fused SwiGLU gate_up,
interleaved rotary on half of each head, RMSNorm) is built and its tensors
rewritten into the release's layout (the inverse of transformers'
convert_glm_weights_to_hf.py):

  model.embed_tokens.weight           -> transformer.embedding.word_embeddings.weight
  model.layers.N.self_attn.q/k/v_proj -> transformer.encoder.layers.N.self_attention.query_key_value
                                         (weight and bias, q rows, then k, then v)
  model.layers.N.self_attn.o_proj     -> ...self_attention.dense
  model.layers.N.mlp.gate_up_proj     -> ...mlp.dense_h_to_4h (gate rows first, as ChatGLM's swiglu chunks)
  model.layers.N.mlp.down_proj        -> ...mlp.dense_4h_to_h
  model.layers.N.*_layernorm          -> transformer.encoder.layers.N.*_layernorm
  model.norm.weight                   -> transformer.encoder.final_layernorm.weight
  lm_head.weight                      -> transformer.output_layer.weight

plus the release's persistent rotary buffer transformer.rotary_pos_emb.inv_freq
([kv_channels/4], the model's dtype), which vLLM drops.  config.json is the
release's (glm-4-9b-chat's keys, tiny values), architectures ChatGLMModel;
no tokenizer (ChatGLM's is remote code; vLLM runs token-id prompts with
skip_tokenizer_init).  make(out, arch=...) writes ChatGLMForConditionalGeneration
instead (what exports through AutoModelForCausalLM name; the same vLLM class).
"""
import json
import os


def make(out, arch="ChatGLMModel", tie=False, mha=False, qkv_bias=True,
         layernorm=False, linear_bias=False):
    """The release's layout (glm-4-9b-chat's config keys).  The keywords
    write variants no release ships, to check the rules' other branches:
    tie (tie_word_embeddings true, no output_layer), mha
    (multi_query_attention false: 4 kv heads, multi_query_group_num left at
    2), qkv_bias False (add_qkv_bias false, the bias still shipped: vLLM
    ignores it), layernorm (rmsnorm false: LayerNorm biases added) and
    linear_bias (add_bias_linear: biases of dense, dense_h_to_4h and
    dense_4h_to_h added)."""
    import torch
    import transformers
    from ckpt_io import perturb_and_save
    from make_ckpt import COMMON
    rope_ratio = 5
    kw = dict(COMMON, num_key_value_heads=4 if mha else 2, attention_bias=True, partial_rotary_factor=0.5,
              tie_word_embeddings=tie, pad_token_id=0, eos_token_id=1,
              max_position_embeddings=512, rms_norm_eps=1.5625e-07,
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0 * rope_ratio,
                               "partial_rotary_factor": 0.5})
    cfg = transformers.GlmConfig(**kw)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.GlmForCausalLM(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    hd = cfg.head_dim
    assert hd == cfg.hidden_size // cfg.num_attention_heads  # vLLM's head_dim

    # q, k and v may lie in different shards: the whole state is read,
    # rewritten, and each tensor written to the shard its first source was in
    from safetensors.torch import load_file, save_file
    idx_path = os.path.join(out, "model.safetensors.index.json")
    idx = json.load(open(idx_path))
    files = sorted(set(idx["weight_map"].values()))
    src, where = {}, {}
    for f in files:
        for k, v in load_file(os.path.join(out, f)).items():
            src[k], where[k] = v, f
    t, at = {}, {}
    for name in sorted(src):
        new = None
        if name.startswith("model.layers."):
            n, rest = name[len("model.layers."):].split(".", 1)
            pre = "transformer.encoder.layers.%s." % n
            if rest.startswith("self_attn.") and rest.split(".")[1] in ("q_proj", "k_proj",
                                                                      "v_proj"):
                kind = rest.split(".")[2]
                new = pre + "self_attention.query_key_value." + kind
                if new not in t:
                    qkv = ["model.layers.%s.self_attn.%s_proj.%s" % (n, p, kind) for p in "qkv"]
                    t[new] = torch.cat([src[x] for x in qkv], 0).contiguous()
                    at[new] = where[qkv[0]]
                continue
            new = pre + (rest.replace("self_attn.o_proj.", "self_attention.dense.")
                         .replace("mlp.gate_up_proj.", "mlp.dense_h_to_4h.")
                         .replace("mlp.down_proj.", "mlp.dense_4h_to_h."))
        else:
            for a, b in [("model.embed_tokens.", "transformer.embedding.word_embeddings."),
                         ("model.norm.", "transformer.encoder.final_layernorm."),
                         ("lm_head.", "transformer.output_layer.")]:
                if name.startswith(a):
                    new = b + name[len(a):]
        assert new is not None, name
        t[new], at[new] = src[name], where[name]
    # chatglm2's RotaryEmbedding(rotary_dim // 2): inv_freq over kv_channels/2
    # channels, every other one, in the model's dtype (a persistent buffer)
    dim = hd // 2
    inv = 1.0 / (10000.0 * rope_ratio) ** (torch.arange(0, dim, 2).float() / dim)
    t["transformer.rotary_pos_emb.inv_freq"] = inv.to(torch.bfloat16)
    at["transformer.rotary_pos_emb.inv_freq"] = at["transformer.embedding.word_embeddings.weight"]
    torch.manual_seed(99)
    H, I = cfg.hidden_size, cfg.intermediate_size

    def extra(name, n):
        t[name] = (torch.randn(n) * 0.02).to(torch.bfloat16)
        at[name] = at["transformer.encoder.final_layernorm.weight"]
    for n in range(cfg.num_hidden_layers) if (layernorm or linear_bias) else ():
        pre = "transformer.encoder.layers.%d." % n
        if layernorm:
            extra(pre + "input_layernorm.bias", H)
            extra(pre + "post_attention_layernorm.bias", H)
        if linear_bias:
            extra(pre + "self_attention.dense.bias", H)
            extra(pre + "mlp.dense_h_to_4h.bias", 2 * I)
            extra(pre + "mlp.dense_4h_to_h.bias", H)
    if layernorm:
        extra("transformer.encoder.final_layernorm.bias", H)
    for f in files:
        save_file({k: v for k, v in t.items() if at[k] == f}, os.path.join(out, f),
                  metadata={"format": "pt"})
    idx["weight_map"] = dict(sorted(at.items()))
    with open(idx_path, "w") as fh:
        json.dump(idx, fh, indent=2)
    auto = "modeling_chatglm.ChatGLMForConditionalGeneration"
    c = {"_name_or_path": "THUDM/glm-4-9b-chat", "model_type": "chatglm",
         "architectures": [arch],
         "auto_map": {"AutoConfig": "configuration_chatglm.ChatGLMConfig",
                      "AutoModel": auto, "AutoModelForCausalLM": auto,
                      "AutoModelForSeq2SeqLM": auto,
                      "AutoModelForSequenceClassification":
                          "modeling_chatglm.ChatGLMForSequenceClassification"},
         "add_bias_linear": linear_bias, "add_qkv_bias": qkv_bias,
         "apply_query_key_layer_scaling": True,
         "apply_residual_connection_post_layernorm": False,
         "attention_dropout": 0.0, "attention_softmax_in_fp32": True,
         "attn_implementation": "sdpa", "bias_dropout_fusion": True,
         "ffn_hidden_size": cfg.intermediate_size, "fp32_residual_connection": False,
         "hidden_dropout": 0.0, "hidden_size": cfg.hidden_size, "kv_channels": hd,
         "layernorm_epsilon": cfg.rms_norm_eps, "multi_query_attention": not mha,
         "multi_query_group_num": 2,
         "num_attention_heads": cfg.num_attention_heads,
         "num_hidden_layers": cfg.num_hidden_layers, "num_layers": cfg.num_hidden_layers,
         "rope_ratio": rope_ratio, "original_rope": True,
         "padded_vocab_size": cfg.vocab_size, "post_layer_norm": True, "rmsnorm": not layernorm,
         "seq_length": 512, "use_cache": True, "torch_dtype": "bfloat16",
         "transformers_version": "4.42.4", "tie_word_embeddings": tie,
         "eos_token_id": [1], "pad_token_id": 0}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)


def make_variant(out):
    """ChatGLMForConditionalGeneration with multi-head attention, no q/k/v
    bias, LayerNorms and linear biases: the rules' other branches."""
    make(out, arch="ChatGLMForConditionalGeneration", mha=True, qkv_bias=False,
         layernorm=True, linear_bias=True)
