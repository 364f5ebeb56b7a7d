"""Alibaba's mGTE encoders (Alibaba-NLP/gte-multilingual-base,
gte-base-en-v1.5, gte-large-en-v1.5: config.json NewModel, model_type
"new", remote code Alibaba-NLP/new-impl), which vLLM 0.32 serves as
GteNewModel (--hf-overrides '{"architectures": ["GteNewModel"]}'), tiny.
transformers 5.19 has the model as GteModel, whose save_pretrained writes
new-impl's names (qkv_proj packed q|k|v, up_gate_proj up|gate, attn_ln,
mlp_ln); only config.json is the release's, with a minimal
configuration_new.py beside it (transformers knows no "new"; vLLM asserts
the class name NewConfig).  config.json names GteNewModel, what the
override gives: the oracle passes no hf_overrides."""

CONFIG_NEW_PY = '''"""mGTE's configuration (the keys of Alibaba-NLP/new-impl configuration.py,
written for the wshard test checkpoints: transformers knows no "new")."""
from transformers.configuration_utils import PretrainedConfig


class NewConfig(PretrainedConfig):
    model_type = "new"

    def __init__(self, vocab_size=30528, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.0,
                 max_position_embeddings=2048, type_vocab_size=1, initializer_range=0.02,
                 layer_norm_type="layer_norm", layer_norm_eps=1e-12,
                 position_embedding_type="rope", rope_theta=10000.0, rope_scaling=None,
                 classifier_dropout=None, pack_qkv=True, unpad_inputs=False,
                 use_memory_efficient_attention=False, logn_attention_scale=False,
                 logn_attention_clip1=False, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.hidden_act = hidden_act
        self.intermediate_size = intermediate_size
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_type = layer_norm_type
        self.layer_norm_eps = layer_norm_eps
        self.position_embedding_type = position_embedding_type
        self.rope_theta = rope_theta
        self.rope_scaling = rope_scaling
        self.classifier_dropout = classifier_dropout
        self.pack_qkv = pack_qkv
        self.unpad_inputs = unpad_inputs
        self.use_memory_efficient_attention = use_memory_efficient_attention
        self.logn_attention_scale = logn_attention_scale
        self.logn_attention_clip1 = logn_attention_clip1
        super().__init__(**kwargs)
'''

SIZES = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
             num_attention_heads=4, vocab_size=1000, max_position_embeddings=512)


def _new_config(arch):
    """config.json as the mGTE releases have it (gte-multilingual-base's keys;
    rope_scaling left null here: the release's {"type": "ntk", "factor": 8.0}
    changes no weight)."""
    c = {"architectures": [arch],
         "auto_map": {"AutoConfig": "configuration_new.NewConfig"},
         "attention_probs_dropout_prob": 0.0, "classifier_dropout": 0.0,
         "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
         "initializer_range": 0.02, "layer_norm_eps": 1e-12,
         "layer_norm_type": "layer_norm", "logn_attention_clip1": False,
         "logn_attention_scale": False, "model_type": "new", "pack_qkv": True,
         "pad_token_id": 1, "position_embedding_type": "rope", "rope_scaling": None,
         "rope_theta": 160000, "torch_dtype": "bfloat16", "type_vocab_size": 1,
         "unpad_inputs": False, "use_memory_efficient_attention": False}
    c.update(SIZES)
    return c


def make(out):
    import torch
    import transformers
    from ckpt_io import perturb_and_save, write_release_config
    from make_ckpt import word_tokenizer
    cfg = transformers.GteConfig(**SIZES, type_vocab_size=1, pad_token_id=1)
    torch.manual_seed(1234)
    model = transformers.GteModel(cfg, add_pooling_layer=False).to(torch.bfloat16)
    perturb_and_save(model, out)
    write_release_config(out, _new_config("GteNewModel"), {"configuration_new.py": CONFIG_NEW_PY})
    # vLLM's pooling runner tokenizes: XLM-R's special ids
    word_tokenizer(cfg, {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3},
                   "<pad>", "</s>", "<s>", "<unk>").save_pretrained(out)


def make_reranker(out):
    """GteNewForSequenceClassification (gte-multilingual-reranker-base's
    form: new.embeddings.*, new.encoder.layer.N.*, new.pooler.dense.*,
    classifier.* with one label), made by transformers'
    GteForSequenceClassification, which saves the encoder under gte.: renamed
    to the release's new.  config.json names GteNewForSequenceClassification,
    what the override gives."""
    import torch
    import transformers
    from ckpt_io import perturb_and_save, rename_prefix, write_release_config
    from make_ckpt import word_tokenizer
    cfg = transformers.GteConfig(**SIZES, type_vocab_size=1, pad_token_id=1, num_labels=1)
    torch.manual_seed(1234)
    model = transformers.GteForSequenceClassification(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    rename_prefix(out, "gte.", "new.")
    c = _new_config("GteNewForSequenceClassification")
    c.update(id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0})
    write_release_config(out, c, {"configuration_new.py": CONFIG_NEW_PY})
    word_tokenizer(cfg, {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3},
                   "<pad>", "</s>", "<s>", "<unk>").save_pretrained(out)
