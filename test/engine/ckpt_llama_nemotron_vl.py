"""NVIDIA's Llama Nemotron VL embedding model and reranker, tiny, as vLLM
0.32 reads them (model_executor/models/nemotron_vl.py: LlamaNemotronVLModel
-> LlamaNemotronVLForEmbedding, LlamaNemotronVLForSequenceClassification;
siglip.py, llama.py; model_executor/models/config.py LlamaNemotronVLConfig).

The embedding model (nvidia/llama-nemotron-embed-vl-1b-v2's form,
model_type llama_nemotron_vl, remote code): transformers' SiglipVisionModel
under vision_model. (its transformers 4.x names, so
vision_model.vision_model.*, the pooling head kept as the release holds it:
vLLM drops it), the bidirectional Llama text model of llm_config saved as
a bare LlamaModel (LlamaBidirectionalModel) under language_model.
(language_model.layers.*, .embed_tokens., .norm.: no LM head) and the
projector mlp1 (nn.Sequential: LayerNorm(4*Hv), Linear(4*Hv, hidden), GELU,
Linear(hidden, hidden): indices 0, 1, 3).  Random, seeded.  The tower: 2
layers of 4 heads of 16 over one 56x56 tile of 14-pixel patches,
pixel-shuffled 2x2 into 4 image tokens; the text model make_ckpt.py's
COMMON.

The reranker (make_cls; nvidia/llama-nemotron-rerank-vl-1b-v2's form): the
same model under model., llm_config's architecture
LlamaBidirectionalForSequenceClassification (num_labels 1), and its head
score.weight [1, hidden] at the top; no language_model.score (vLLM builds
one and fills it with random values: nemotron_vl.py's load_weights).

config.json as the releases write it (LlamaNemotronVLConfig's keys:
vision_config with model_type siglip_vision_model, llm_config with its
architectures and model_type llama_bidirec, select_layer, force_image_size,
downsample_ratio, dynamic_image_size, use_thumbnail, min/max_dynamic_patch,
max_input_tiles, pooling, img_context_token_id, query/passage prefixes),
with configuration_llama_nemotron_vl.py beside it (a minimal version of
the release's, for trust_remote_code: neither transformers nor vLLM 0.32
knows the model type llama_nemotron_vl; vLLM remaps llm_config to
text_config).

The processor is vLLM's LlamaNemotronVLEmbedProcessor (InternVL's with
SigLIP's normalisation), the tokenizer ckpt_internvl_chat.py's: <img> 997,
</img> 996, <IMG_CONTEXT> 999, <video> 995, <image> 994; a prompt's image
stands at <image>, which vLLM replaces by <img> + <IMG_CONTEXT> x 4 + </img>.

    ckpt_llama_nemotron_vl.py OUT
"""
import os

CONFIG_PY = '''"""Llama Nemotron VL's configuration (the keys of NVIDIA's
LlamaNemotronVLConfig), written for the wshard test checkpoints."""
from transformers import LlamaConfig, SiglipVisionConfig
from transformers.configuration_utils import PretrainedConfig


class LlamaBidirectionalConfig(LlamaConfig):
    model_type = "llama_bidirec"

    def __init__(self, pooling="avg", temperature=1.0, **kwargs):
        self.pooling = pooling
        self.temperature = temperature
        super().__init__(**kwargs)


class LlamaNemotronVLConfig(PretrainedConfig):
    model_type = "llama_nemotron_vl"
    is_composition = True
    has_no_defaults_at_init = True

    def __init__(self, vision_config=None, llm_config=None, use_backbone_lora=0,
                 use_llm_lora=0, select_layer=-1, force_image_size=None,
                 downsample_ratio=0.5, template=None, dynamic_image_size=False,
                 use_thumbnail=False, min_dynamic_patch=1, max_dynamic_patch=6,
                 mlp_checkpoint=True, pre_feature_reduction=False, keep_aspect_ratio=False,
                 vocab_size=-1, q_max_length=512, p_max_length=10240,
                 query_prefix="query:", passage_prefix="passage:", pooling="last",
                 bidirectional_attention=False, max_input_tiles=2,
                 img_context_token_id=128258, **kwargs):
        vision_config = dict(vision_config or {"model_type": "siglip_vision_model"})
        llm_config = dict(llm_config or {"architectures": ["LlamaBidirectionalModel"]})
        if vision_config.get("model_type") != "siglip_vision_model":
            raise ValueError("Unsupported model_type: %s" % vision_config.get("model_type"))
        vision_config.pop("model_type", None)
        self.vision_config = SiglipVisionConfig(**vision_config)
        if llm_config["architectures"][0] not in (
                "LlamaBidirectionalModel", "LlamaBidirectionalForSequenceClassification"):
            raise ValueError("Unsupported architecture: %s" % llm_config["architectures"][0])
        llm_config.pop("model_type", None)
        self.llm_config = LlamaBidirectionalConfig(**llm_config)
        self.vocab_size = self.llm_config.vocab_size
        self.use_backbone_lora = use_backbone_lora
        self.use_llm_lora = use_llm_lora
        self.select_layer = select_layer
        self.force_image_size = force_image_size
        self.downsample_ratio = downsample_ratio
        self.template = template
        self.dynamic_image_size = dynamic_image_size
        self.use_thumbnail = use_thumbnail
        self.min_dynamic_patch = min_dynamic_patch
        self.max_dynamic_patch = max_dynamic_patch
        self.mlp_checkpoint = mlp_checkpoint
        self.pre_feature_reduction = pre_feature_reduction
        self.keep_aspect_ratio = keep_aspect_ratio
        self.q_max_length = q_max_length
        self.p_max_length = p_max_length
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.pooling = pooling
        self.bidirectional_attention = bidirectional_attention
        self.img_context_token_id = img_context_token_id
        self.max_input_tiles = max_input_tiles
        super().__init__(**kwargs)
'''

VIT = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
           num_attention_heads=4, num_channels=3, image_size=56, patch_size=14,
           hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6)


def _model(cls_head):
    """The embedding model's tensors (the release's names) and configs."""
    import torch
    import transformers
    from make_ckpt import COMMON
    vcfg = transformers.SiglipVisionConfig(**VIT)
    tcfg = transformers.LlamaConfig(**dict(COMMON, tie_word_embeddings=False, bos_token_id=2,
                                           eos_token_id=1, pad_token_id=0,
                                           rope_theta=500000.0))
    torch.manual_seed(1234)
    vision = transformers.SiglipVisionModel(vcfg).to(torch.bfloat16)
    text = transformers.LlamaModel(tcfg).to(torch.bfloat16)
    hv, h = vcfg.hidden_size, tcfg.hidden_size
    mlp1 = torch.nn.Sequential(torch.nn.LayerNorm(4 * hv), torch.nn.Linear(4 * hv, h),
                               torch.nn.GELU(), torch.nn.Linear(h, h)).to(torch.bfloat16)
    new = {}
    with torch.no_grad():
        # transformers 5's SiglipVisionModel holds the transformer's modules
        # itself (embeddings.*, encoder.*, post_layernorm.*, head.*); 4.x and
        # the release nest them under vision_model.
        for prefix, m in (("vision_model.vision_model.", vision), ("mlp1.", mlp1),
                          ("language_model.", text)):
            for p in m.parameters():
                p.add_(torch.randn_like(p) * 0.02)
            for k, t in m.state_dict().items():
                new[prefix + k] = t.detach().clone().contiguous()
        if cls_head:
            new["score.weight"] = (torch.randn(1, h) * 0.05).to(torch.bfloat16)
    assert "vision_model.vision_model.head.probe" in new
    assert "language_model.layers.0.self_attn.q_proj.weight" in new
    return new, vcfg, tcfg


def make(out, cls_head=False):
    import torch  # noqa: F401
    from ckpt_io import save_shards, write_release_config
    from make_ckpt import word_tokenizer
    new, vcfg, tcfg = _model(cls_head)
    if cls_head:
        new = {k if k == "score.weight" else "model." + k: t for k, t in new.items()}
    os.makedirs(out, exist_ok=True)
    # two shards, as the 1B releases ship them: the tower, projector and
    # head, then the text model
    text = sorted(k for k in new if ".language_model." in "." + k)
    save_shards(out, new, [sorted(set(new) - set(text)), text])

    llm_config = tcfg.to_dict()
    llm_config["architectures"] = (["LlamaBidirectionalForSequenceClassification"] if cls_head
                                   else ["LlamaBidirectionalModel"])
    llm_config["model_type"] = "llama_bidirec"
    llm_config["pooling"] = "avg"
    llm_config["temperature"] = 1.0
    llm_config.pop("dtype", None)
    llm_config["torch_dtype"] = "bfloat16"
    if cls_head:
        llm_config["id2label"] = {"0": "LABEL_0"}
        llm_config["label2id"] = {"LABEL_0": 0}
    else:
        llm_config.pop("id2label", None)
        llm_config.pop("label2id", None)
    vision_config = vcfg.to_dict()
    vision_config.pop("dtype", None)
    vision_config["torch_dtype"] = "bfloat16"
    arch = ("LlamaNemotronVLForSequenceClassification" if cls_head
            else "LlamaNemotronVLModel")
    c = {"architectures": [arch],
         "auto_map": {"AutoConfig": "configuration_llama_nemotron_vl.LlamaNemotronVLConfig",
                      "AutoModel": "modeling_llama_nemotron_vl." + arch},
         "bidirectional_attention": False, "downsample_ratio": 0.5,
         "dynamic_image_size": True, "force_image_size": 56,
         "img_context_token_id": 999, "keep_aspect_ratio": False, "llm_config": llm_config,
         "max_dynamic_patch": 1, "max_input_tiles": 1, "min_dynamic_patch": 1,
         "mlp_checkpoint": True, "model_type": "llama_nemotron_vl",
         "p_max_length": 10240, "passage_prefix": "passage:", "pooling": "avg",
         "ps_version": "v2",
         "pre_feature_reduction": False, "q_max_length": 512, "query_prefix": "query:",
         "select_layer": -1, "template": "bidirectional-llama-retriever",
         "torch_dtype": "bfloat16", "transformers_version": None,
         "use_backbone_lora": 0, "use_llm_lora": 0, "use_thumbnail": True,
         "vision_config": vision_config}
    write_release_config(out, c, {"configuration_llama_nemotron_vl.py": CONFIG_PY})
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<img>": 997, "</img>": 996, "<IMG_CONTEXT>": 999,
               "<video>": 995, "<image>": 994}
    word_tokenizer(tcfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)


def make_cls(out):
    """The reranker: the embedding model under model., score.weight at the
    top."""
    make(out, cls_head=True)
