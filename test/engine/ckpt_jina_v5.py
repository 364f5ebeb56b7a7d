"""Jina AI's jina-embeddings-v5-text (config.json JinaEmbeddingsV5Model,
model_type "jina_embeddings_v5", remote code), which vLLM 0.32 serves as
JinaEmbeddingsV5Model, tiny.  Two backbones under the one architecture,
told apart by is_decoder: -small is Qwen3-0.6B-Base (the release's
modeling code loads it with transformers' Qwen3Model: the names
embed_tokens.weight, layers.N.*, norm.weight, no model. prefix, no LM
head), -nano is EuroBERT-210m (is_decoder false: transformers'
EuroBertModel, the same names).  The releases hold the base weights with
four LoRA adapters beside them (adapters/{retrieval,text-matching,
classification,clustering}/adapter_model.safetensors), one of which vLLM
merges into the weights as it loads them; Jina's per-task repos
(-retrieval and the others) hold the weights with the adapter merged in
and no adapters/ folder.  These are the per-task form: vLLM loads the
weights as they are ("No adapter found ... Loading raw base weights").
config.json and configuration_jina_embeddings_v5.py are written as the
releases have them (the config class a subclass of transformers' own,
model_type changed); the oracle passes trust_remote_code."""
import os

CONFIG_PY = '''"""jina-embeddings-v5-text's configuration (the release's
configuration_jina_embeddings_v5.py, written for the wshard test checkpoints:
transformers' {base} with the release's model_type and task names)."""
from transformers import {base}


class JinaEmbeddingsV5Config({base}):
    model_type = "jina_embeddings_v5"

    def __init__(self, task_names=None, **kwargs):
        self.task_names = task_names or ["retrieval", "text-matching", "clustering", "classification"]
        super().__init__(**kwargs)
'''

TASKS = ["retrieval", "text-matching", "clustering", "classification"]


def _release(out, cfg, base, is_decoder):
    """config.json as the release has it: the backbone's keys under the
    release's model_type and architecture, the auto_map to its code, the
    task names and is_decoder."""
    import json
    from ckpt_io import write_release_config
    c = json.load(open(os.path.join(out, "config.json")))
    c.update(architectures=["JinaEmbeddingsV5Model"], model_type="jina_embeddings_v5",
             auto_map={"AutoConfig": "configuration_jina_embeddings_v5.JinaEmbeddingsV5Config",
                       "AutoModel": "modeling_jina_embeddings_v5.JinaEmbeddingsV5Model"},
             task_names=TASKS, is_decoder=is_decoder)
    write_release_config(out, c, {"configuration_jina_embeddings_v5.py":
                                  CONFIG_PY.replace("{base}", base)})


def _save(out, cfg, model_cls, is_decoder):
    """The backbone model_cls of cfg, random and perturbed, saved as the
    release is, with a word-level tokenizer."""
    import torch
    import transformers
    from ckpt_io import perturb_and_save
    from make_ckpt import word_tokenizer
    torch.manual_seed(1234)
    model = getattr(transformers, model_cls)(cfg).to(torch.bfloat16)
    perturb_and_save(model, out)
    _release(out, cfg, type(cfg).__name__, is_decoder)
    word_tokenizer(cfg, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3},
                   "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)


def make(out, tie=True):
    """-small's form: a Qwen3 decoder saved as Qwen3Model (tied embeddings,
    as Qwen3-0.6B-Base)."""
    import transformers
    from make_ckpt import COMMON
    _save(out, transformers.Qwen3Config(**COMMON, tie_word_embeddings=tie), "Qwen3Model", True)


def make_untied(out):
    """A decoder without tied embeddings: the pipeline the rules lay out
    for a decoder (a tied one's is refused)."""
    make(out, tie=False)


def make_nano(out):
    """-nano's form: a EuroBERT encoder saved as EuroBertModel, is_decoder
    false (vLLM's config hook then sets is_causal false: a bidirectional
    Llama)."""
    import transformers
    from make_ckpt import COMMON
    cfg = transformers.EuroBertConfig(**COMMON, pad_token_id=0, bos_token_id=2,
                                      eos_token_id=1, mask_token_id=4)
    _save(out, cfg, "EuroBertModel", False)
