"""ColBERT late-interaction retrievers as vLLM 0.32 reads them
(model_executor/models/colbert.py), tiny, from transformers' own encoder
classes:

make_bert: HF_ColBERT (colbert-ir/colbertv2.0's layout): a BERT encoder
under bert. and the projection linear.weight [dim, hidden] (no bias) in the
checkpoint; config.json names HF_ColBERT without a dim (vLLM takes it from
the weight).

make_modernbert: ColBERTModernBertModel (lightonai/GTE-ModernColBERT-v1's
layout, config.json naming the architecture as --hf-overrides does): the
ModernBERT encoder as transformers' ModernBertModel saves it, the projection
in sentence-transformers' 1_Dense/ folder (PyLate's Dense), which vLLM
reads as it builds the pooler.

make_lfm2: ColBERTLfm2Model (LiquidAI/LFM2-ColBERT-350M's layout): the LFM2
backbone as transformers' Lfm2Model saves it (no model. prefix: vLLM's
Lfm2Model loads the names itself), the projection in 1_Dense/.

make_jina: ColBERTJinaRobertaModel (jinaai/jina-colbert-v2's layout): Jina's
rotary XLM-RoBERTa under roberta. (emb_ln, mixer.Wqkv, ...), made from
transformers' XLMRobertaModel's weights renamed, the projection
linear.weight in the checkpoint; config.json the release's keys with a
remote-code XLMRobertaFlashConfig beside it."""
import json
import os

DIM = 32


def _tokenizer(cfg, out):
    from make_ckpt import word_tokenizer
    word_tokenizer(cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)


def _save(out, sd, shard=1 << 20):
    """sd's tensors into OUT in shards of about SHARD bytes, with an index."""
    from safetensors.torch import save_file
    os.makedirs(out, exist_ok=True)
    shards, cur, size = [], {}, 0
    for k in sorted(sd):
        n = sd[k].numel() * sd[k].element_size()
        if cur and size + n > shard:
            shards.append(cur)
            cur, size = {}, 0
        cur[k] = sd[k].contiguous()
        size += n
    shards.append(cur)
    index = {}
    for i, part in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(part, os.path.join(out, name), metadata={"format": "pt"})
        index.update({k: name for k in part})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": index}, f, indent=1)


def _config(out, model_cfg, arch, **extra):
    d = model_cfg.to_dict()
    d["architectures"] = [arch]
    d.update(extra)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(d, f, indent=1)


def _dense(out, hidden, seed=99):
    """PyLate's modules.json: the Transformer, then 1_Dense (a bias-free
    projection to DIM, identity activation)."""
    import torch
    from safetensors.torch import save_file
    with open(os.path.join(out, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "",
                    "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Dense",
                    "type": "pylate.models.Dense.Dense"}], f)
    os.makedirs(os.path.join(out, "1_Dense"), exist_ok=True)
    with open(os.path.join(out, "1_Dense", "config.json"), "w") as f:
        json.dump({"in_features": hidden, "out_features": DIM, "bias": False,
                   "activation_function": "torch.nn.modules.linear.Identity"}, f)
    g = torch.Generator().manual_seed(seed)
    save_file({"linear.weight": (torch.randn(DIM, hidden, generator=g) * 0.05)},
              os.path.join(out, "1_Dense", "model.safetensors"))


def make_bert(out, name="linear.weight", **extra):
    import torch
    import transformers
    from ckpt_io import saved_tensors
    from make_ckpt import COMMON
    cfg = transformers.BertConfig(**{k: v for k, v in COMMON.items()
                                     if k not in ("num_key_value_heads", "head_dim")})
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.BertModel(cfg).to(torch.bfloat16)
    sd = {"bert." + k: v for k, v in saved_tensors(model, out).items()}
    g = torch.Generator().manual_seed(7)
    sd[name] = (torch.randn(DIM, cfg.hidden_size, generator=g) * 0.05).to(torch.bfloat16)
    _save(out, sd)
    _config(out, cfg, "HF_ColBERT", **extra)
    _tokenizer(cfg, out)


def make_bert_colbert_linear(out):
    """The projection named colbert_linear.weight (vLLM takes either)."""
    make_bert(out, "colbert_linear.weight")


def make_bert_hdm(out):
    """config.json's head_dtype "model": vLLM builds the projection in the
    model's dtype (BF16), not F32."""
    make_bert(out, head_dtype="model")


def _linear(sd, hidden, name="linear.weight"):
    """The projection in the checkpoint itself, as HF_ColBERT's."""
    import torch
    g = torch.Generator().manual_seed(7)
    sd[name] = (torch.randn(DIM, hidden, generator=g) * 0.05).to(torch.bfloat16)
    return sd


def _encoder(out, cfg, cls, arch, st, name):
    """A ColBERT checkpoint of transformers' encoder cls (names without a
    prefix, as the releases), its projection in the checkpoint as name, or
    (st) only in 1_Dense/."""
    import torch
    from ckpt_io import saved_tensors
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = cls(cfg).to(torch.bfloat16)
    sd = saved_tensors(model, out)
    _save(out, sd if st else _linear(sd, cfg.hidden_size, name))
    _config(out, cfg, arch)
    _tokenizer(cfg, out)
    if st:
        _dense(out, cfg.hidden_size)


def make_modernbert(out, st=False):
    import transformers
    from make_ckpt import COMMON, MODERNBERT
    kw = {k: v for k, v in COMMON.items() if k not in ("num_key_value_heads", "head_dim")}
    cfg = transformers.ModernBertConfig(**kw, **MODERNBERT)
    _encoder(out, cfg, transformers.ModernBertModel, "ColBERTModernBertModel", st,
             "linear.weight")


def make_modernbert_st(out):
    """The release's form: the projection only in 1_Dense/."""
    make_modernbert(out, True)


def make_lfm2(out, st=False):
    import transformers
    from make_ckpt import COMMON
    kw = dict(COMMON, layer_types=["conv", "full_attention"], block_dim=256, conv_dim=256,
              pad_token_id=0, bos_token_id=1, eos_token_id=2)
    kw.pop("head_dim")
    cfg = transformers.Lfm2Config(**kw)
    _encoder(out, cfg, transformers.Lfm2Model, "ColBERTLfm2Model", st,
             "colbert_linear.weight")


def make_lfm2_st(out):
    """The release's form: the projection only in 1_Dense/."""
    make_lfm2(out, True)


# jina-colbert-v2's configuration: jinaai/xlm-roberta-flash-implementation's
# XLMRobertaFlashConfig keys (vLLM asserts the class name; its LoRA merge
# reads lora_alpha and lora_rank whether or not the checkpoint has adapters)
JINA_DEFAULTS = {
    "vocab_size": 250002, "hidden_size": 1024, "num_hidden_layers": 24,
    "num_attention_heads": 16, "intermediate_size": 4096, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 8194, "type_vocab_size": 1, "initializer_range": 0.02,
    "layer_norm_eps": 1e-05, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
    "position_embedding_type": "rotary", "rotary_emb_base": 20000.0, "use_cache": True,
    "classifier_dropout": None, "lora_adaptations": None, "lora_prompts": {},
    "lora_rank": 4, "lora_dropout_p": 0.0, "lora_alpha": 1,
    "lora_main_params_trainable": False, "load_trained_adapters": False,
    "use_flash_attn": True, "emb_pooler": None,
    "matryoshka_dimensions": None, "truncate_dim": None}


def _jina_names(sd, layers):
    """transformers' XLMRobertaModel's tensors under the names of Jina's
    flash implementation (roberta.*, emb_ln, encoder.layers.N.mixer.Wqkv
    packed q|k|v, mixer.out_proj, norm1, mlp.fc1, mlp.fc2, norm2), its
    position embeddings left out (rotary positions)."""
    import torch
    out = {}
    rename = {"attention.output.dense.": "mixer.out_proj.",
              "attention.output.LayerNorm.": "norm1.", "intermediate.dense.": "mlp.fc1.",
              "output.dense.": "mlp.fc2.", "output.LayerNorm.": "norm2."}
    for k, v in sd.items():
        if k.startswith("embeddings.LayerNorm."):
            out["roberta.emb_ln." + k.rsplit(".", 1)[1]] = v
        elif k.startswith(("embeddings.word_embeddings.", "embeddings.token_type_embeddings.",
                           "pooler.")):
            out["roberta." + k] = v
        elif k.startswith("encoder.layer.") and ".attention.self." not in k:
            n, rest = k[len("encoder.layer."):].split(".", 1)
            for old, new in rename.items():
                if rest.startswith(old):
                    out[f"roberta.encoder.layers.{n}.{new}{rest[len(old):]}"] = v
                    break
            else:
                raise ValueError(k)
        elif k != "embeddings.position_embeddings.weight" and ".attention.self." not in k:
            raise ValueError(k)
    for n in range(layers):
        p = f"encoder.layer.{n}.attention.self."
        for s in ("weight", "bias"):
            out[f"roberta.encoder.layers.{n}.mixer.Wqkv.{s}"] = torch.cat(
                [sd[p + q + "." + s] for q in ("query", "key", "value")])
    return out


def make_jina(out):
    """ColBERTJinaRobertaModel (jinaai/jina-colbert-v2's layout: Jina's
    XLM-RoBERTa with rotary positions under roberta., its pooler, the
    projection linear.weight [dim, hidden]; config.json the release's keys
    naming ColBERTJinaRobertaModel, as --hf-overrides gives it (the release
    says HF_ColBERT), with a minimal configuration_xlm_roberta.py beside
    it): the weights of transformers' XLMRobertaModel under the release's
    names."""
    import torch
    import transformers
    from ckpt_io import remote_config_py, saved_tensors, write_release_config
    from make_ckpt import COMMON
    sizes = {k: v for k, v in COMMON.items() if k not in ("num_key_value_heads", "head_dim")}
    cfg = transformers.XLMRobertaConfig(**sizes, type_vocab_size=1, pad_token_id=1)
    cfg.dtype = torch.bfloat16
    torch.manual_seed(1234)
    model = transformers.XLMRobertaModel(cfg).to(torch.bfloat16)
    sd = _jina_names(saved_tensors(model, out), cfg.num_hidden_layers)
    _save(out, _linear(sd, cfg.hidden_size))
    c = dict(JINA_DEFAULTS, **sizes, architectures=["ColBERTJinaRobertaModel"],
             auto_map={"AutoConfig": "configuration_xlm_roberta.XLMRobertaFlashConfig"},
             model_type="xlm-roberta", torch_dtype="bfloat16")
    code = remote_config_py("XLMRobertaFlashConfig", "xlm-roberta",
                            "Jina's XLM-RoBERTa configuration (the keys of "
                            "jinaai/xlm-roberta-flash-implementation, for the wshard test "
                            "checkpoints)", JINA_DEFAULTS)
    write_release_config(out, c, {"configuration_xlm_roberta.py": code})
    from make_ckpt import word_tokenizer
    word_tokenizer(cfg, {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3},
                   "<pad>", "</s>", "<s>", "<unk>").save_pretrained(out)
