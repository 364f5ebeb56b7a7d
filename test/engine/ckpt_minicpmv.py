"""MiniCPM-V 2.6, 4.0 and 4.5 in openbmb's remote-code layout (architectures
["MiniCPMV"], model_type minicpmv: openbmb/MiniCPM-V-2_6, MiniCPM-V-4,
MiniCPM-V-4_5), tiny, as vLLM 0.32 reads it (model_executor/models/
minicpmv.py: MiniCPMV dispatches on config.json's version to MiniCPMV2_6
(Qwen2ForCausalLM), MiniCPMV4_0 (LlamaForCausalLM), MiniCPMV4_5
(Qwen3ForCausalLM); the tower is vLLM's Idefics2VisionTransformer, the
resampler Resampler2_5 / Resampler4_5).

Transformers has no class for the whole model, so its parts are
transformers' and torch's own classes, under the release's names:

    llm.model.* / llm.lm_head.weight   transformers' Qwen2ForCausalLM (2.6),
                                       LlamaForCausalLM (4.0), Qwen3ForCausalLM (4.5)
    vpm.embeddings.* / vpm.encoder.layers.N.* / vpm.post_layernorm.*
                                       transformers' SiglipVisionModel's vision_model.*
                                       (no head: the release's navit SigLIP has none)
    resampler.query [query_num, H], resampler.kv_proj.weight [H, Hv] (no bias),
    resampler.attn.{in_proj_weight [3H, H], in_proj_bias, out_proj.weight, out_proj.bias}
                                       (torch.nn.MultiheadAttention, as the release's
                                       Resampler), resampler.ln_q / ln_kv / ln_post
                                       (nn.LayerNorm), resampler.proj [H, H]

H = 256 (COMMON), so the resampler has 256 // 128 = 2 heads, as vLLM builds
it (embed_dim // 128).  The tower: 2 layers, 128 wide, 4 heads, 56-pixel
images of 14-pixel patches (16 positions).  config.json holds the
release's keys (version, query_num, drop_vision_last_layer, slice_config,
image_size, patch_size, use_image_id, vision_config with model_type
siglip, auto_map), with configuration_minicpm.py beside it: a minimal
MiniCPMVConfig on transformers' Qwen2Config / LlamaConfig / Qwen3Config
(the release's own base) for trust_remote_code; transformers does not
know the model type minicpmv, nor does vLLM register a config for it.

No tokenizer and no image processor: vLLM's MiniCPMV processor needs the
release's remote image processor (image_processing_minicpmv.py,
auto_map AutoImageProcessor), which the test checkpoint does not ship;
the oracle prompts it with text alone (the tower and resampler are
compared by bytes).
"""
import os

CONFIG_PY = '''"""MiniCPM-V's configuration (the keys of openbmb's configuration_minicpm.py),
written for the wshard test checkpoints."""
from transformers import %(base)s, SiglipVisionConfig


class MiniCPMVSliceConfig(dict):
    pass


class MiniCPMVConfig(%(base)s):
    model_type = "minicpmv"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(self, use_cache=True, query_num=64, image_size=448, drop_vision_last_layer=True,
                 batch_vision_input=True, slice_config=None, vision_config=None,
                 use_image_id=True, vision_batch_size=16, version=None, **kwargs):
        self.use_cache = use_cache
        self.query_num = query_num
        self.image_size = image_size
        self.drop_vision_last_layer = drop_vision_last_layer
        self.batch_vision_input = batch_vision_input
        self.use_image_id = use_image_id
        self.vision_batch_size = vision_batch_size
        self.slice_config = dict(slice_config or {"max_slice_nums": 9, "patch_size": 14,
                                                  "scale_resolution": 448})
        if version is not None:
            self.version = version
        if isinstance(vision_config, dict) or vision_config is None:
            vc = dict(vision_config or {})
            vc.pop("model_type", None)
            self.vision_config = SiglipVisionConfig(**vc)
        else:
            self.vision_config = vision_config
        self.patch_size = self.vision_config.patch_size
        super().__init__(**kwargs)
'''

RELEASES = {
    # version: (text model_type, transformers config / model, base config class)
    "2.6": ("qwen2", "Qwen2Config", "Qwen2ForCausalLM"),
    "4.0": ("llama", "LlamaConfig", "LlamaForCausalLM"),
    "4.5": ("qwen3", "Qwen3Config", "Qwen3ForCausalLM"),
}
VISION = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
              num_attention_heads=4, image_size=56, patch_size=14, num_channels=3,
              layer_norm_eps=1e-6, hidden_act="gelu_pytorch_tanh")


def make(out, version="2.6", query_num=16, omni=None):
    """omni (ckpt_minicpmo.py's MiniCPM-o parts), where given: a function
    of (torch, hidden size) giving (tensors, config.json keys,
    configuration_minicpm.py's text, tokenizer's extra special tokens),
    the tensors beside the tower's in the first shard."""
    import torch
    import transformers
    from ckpt_io import perturb, save_shards, text_config_keys, write_release_config
    from make_ckpt import COMMON
    text_type, cfg_cls, model_cls = RELEASES[version]
    text = dict(COMMON, tie_word_embeddings=False, bos_token_id=2, eos_token_id=1,
                pad_token_id=0, rms_norm_eps=1e-6, rope_theta=1000000.0)
    if text_type == "qwen2":
        text.pop("head_dim")
    tcfg = getattr(transformers, cfg_cls)(**text)
    torch.manual_seed(1234)
    lm = getattr(transformers, model_cls)(tcfg).to(torch.bfloat16)
    vcfg = transformers.SiglipVisionConfig(vision_use_head=False, **VISION)
    vm = transformers.SiglipVisionModel(vcfg).to(torch.bfloat16)
    H, Hv = COMMON["hidden_size"], VISION["hidden_size"]
    rs = torch.nn.ModuleDict({
        "attn": torch.nn.MultiheadAttention(H, H // 128),
        "kv_proj": torch.nn.Linear(Hv, H, bias=False),
        "ln_q": torch.nn.LayerNorm(H, eps=1e-6), "ln_kv": torch.nn.LayerNorm(H, eps=1e-6),
        "ln_post": torch.nn.LayerNorm(H, eps=1e-6)})
    rs.register_parameter("query", torch.nn.Parameter(torch.randn(query_num, H) * 0.02))
    rs.register_parameter("proj", torch.nn.Parameter((H ** -0.5) * torch.randn(H, H)))
    rs = rs.to(torch.bfloat16)
    new = {}
    perturb(lm, vm, rs)
    for k, t in lm.state_dict().items():
        if "rotary_emb" in k:
            continue
        new["llm." + k] = t.detach().clone().contiguous()
    for k, t in vm.state_dict().items():
        # transformers 5 saves SiglipVisionModel's tower without the
        # vision_model. prefix
        k = k[len("vision_model."):] if k.startswith("vision_model.") else k
        if "position_ids" in k:
            continue
        new["vpm." + k] = t.detach().clone().contiguous()
    for k, t in rs.state_dict().items():
        new["resampler." + k] = t.detach().clone().contiguous()
    extra_cfg, config_py, special = {}, CONFIG_PY % {"base": cfg_cls}, {}
    if omni is not None:
        extra, extra_cfg, config_py, special = omni(torch, cfg_cls, COMMON["hidden_size"])
        new.update(extra)
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in new if not k.startswith("llm.")),
              sorted(k for k in new if k.startswith("llm.model.") and ".layers." not in k)]
    for n in range(COMMON["num_hidden_layers"]):
        groups.append(sorted(k for k in new if k.startswith("llm.model.layers.%d." % n)))
    groups.append(["llm.lm_head.weight"])
    assert sum(map(len, groups)) == len(new)
    save_shards(out, new, groups)
    c = text_config_keys(tcfg)
    c.update({
        "architectures": ["MiniCPMV"], "model_type": "minicpmv",
        "auto_map": {"AutoConfig": "configuration_minicpm.MiniCPMVConfig",
                     "AutoModel": "modeling_minicpmv.MiniCPMV",
                     "AutoModelForCausalLM": "modeling_minicpmv.MiniCPMV"},
        "version": float(version), "query_num": query_num, "image_size": 448,
        "patch_size": VISION["patch_size"], "drop_vision_last_layer": False,
        "batch_vision_input": True, "slice_mode": True, "use_image_id": True,
        "vision_batch_size": 16,
        "slice_config": {"max_slice_nums": 9, "model_type": "minicpmv", "patch_size": 14,
                         "scale_resolution": 448},
        "vision_config": {"hidden_size": Hv, "image_size": VISION["image_size"],
                          "intermediate_size": VISION["intermediate_size"],
                          "model_type": "siglip",
                          "num_attention_heads": VISION["num_attention_heads"],
                          "num_hidden_layers": VISION["num_hidden_layers"],
                          "patch_size": VISION["patch_size"]},
        "rope_theta": 1000000.0, "torch_dtype": "bfloat16", "use_cache": True})
    c.update(extra_cfg)
    write_release_config(out, dict(sorted(c.items())), {"configuration_minicpm.py": config_py})
    tokenizer(out, tcfg, special, omni is not None)


def tokenizer(out, cfg, extra_special=None, omni=False):
    """A word-level tokenizer with MiniCPM-V's image tokens, and the
    release's processor files (preprocessor_config.json with auto_map
    AutoProcessor / AutoImageProcessor) naming minimal remote-code
    classes: vLLM's MiniCPMV processor refuses skip_tokenizer_init, builds
    AutoProcessor for its tokenizer and loads the image processor class
    auto_map names (minicpmv.py MiniCPMVProcessingInfo)."""
    import json
    from make_ckpt import word_tokenizer
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<image>": 997,
               "</image>": 996, "<slice>": 995, "</slice>": 994, "<image_id>": 993,
               "</image_id>": 992}
    special.update(extra_special or {})
    word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)
    # (MiniCPM-o's processor holds a Whisper feature extractor too, read
    # from the same preprocessor_config.json with its defaults)
    proc = "MiniCPMOProcessor" if omni else "MiniCPMVProcessor"
    proc_py = "processing_minicpmo" if omni else "processing_minicpmv"
    auto_map = {"AutoProcessor": proc_py + "." + proc,
                "AutoImageProcessor": "image_processing_minicpmv.MiniCPMVImageProcessor"}
    pre = {"auto_map": auto_map, "image_processor_type": "MiniCPMVImageProcessor",
           "processor_class": proc, "max_slice_nums": 9,
           "scale_resolution": 56, "patch_size": 14, "use_image_id": True,
           "image_feature_size": 16, "im_start": "<image>", "im_end": "</image>",
           "slice_start": "<slice>", "slice_end": "</slice>", "unk": "<unk>",
           "im_id_start": "<image_id>", "im_id_end": "</image_id>", "slice_mode": True,
           "norm_mean": [0.5, 0.5, 0.5], "norm_std": [0.5, 0.5, 0.5], "version": 2.6}
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        json.dump(pre, f, indent=2)
    with open(os.path.join(out, "processor_config.json"), "w") as f:
        json.dump({"auto_map": auto_map, "processor_class": proc}, f, indent=2)
    with open(os.path.join(out, proc_py + ".py"), "w") as f:
        f.write(PROCESSING_O_PY if omni else PROCESSING_PY)
    with open(os.path.join(out, "image_processing_minicpmv.py"), "w") as f:
        f.write(IMAGE_PROCESSING_PY)


PROCESSING_PY = '''"""A minimal MiniCPMVProcessor (the names of openbmb's processing_minicpmv.py),
written for the wshard test checkpoints: vLLM takes only its tokenizer."""
from transformers.processing_utils import ProcessorMixin


class MiniCPMVProcessor(ProcessorMixin):
    attributes = ["image_processor", "tokenizer"]
    image_processor_class = "AutoImageProcessor"
    tokenizer_class = "AutoTokenizer"

    def __init__(self, image_processor=None, tokenizer=None, **kwargs):
        super().__init__(image_processor, tokenizer)
'''

PROCESSING_O_PY = '''"""A minimal MiniCPMOProcessor (the names of openbmb's processing_minicpmo.py),
written for the wshard test checkpoints: vLLM takes its tokenizer and its
feature extractor."""
from transformers.processing_utils import ProcessorMixin


class MiniCPMOProcessor(ProcessorMixin):
    attributes = ["image_processor", "feature_extractor", "tokenizer"]
    image_processor_class = "AutoImageProcessor"
    feature_extractor_class = "WhisperFeatureExtractor"
    tokenizer_class = "AutoTokenizer"

    def __init__(self, image_processor=None, feature_extractor=None, tokenizer=None, **kwargs):
        super().__init__(image_processor, feature_extractor, tokenizer)
'''

IMAGE_PROCESSING_PY = '''"""A minimal MiniCPMVImageProcessor (the attributes of openbmb's
image_processing_minicpmv.py that vLLM reads), written for the wshard test
checkpoints: the oracle prompts the model with text alone, so that no image
is ever processed."""
from transformers.image_processing_utils import BaseImageProcessor


class MiniCPMVImageProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values"]

    def __init__(self, max_slice_nums=9, scale_resolution=448, patch_size=14,
                 image_feature_size=64, im_start="<image>", im_end="</image>",
                 slice_start="<slice>", slice_end="</slice>", unk="<unk>",
                 im_id_start="<image_id>", im_id_end="</image_id>", slice_mode=True,
                 use_image_id=True, norm_mean=None, norm_std=None, version=2.6, **kwargs):
        super().__init__(**kwargs)
        self.max_slice_nums = max_slice_nums
        self.scale_resolution = scale_resolution
        self.patch_size = patch_size
        self.image_feature_size = image_feature_size
        self.im_start_token, self.im_end_token = im_start, im_end
        self.slice_start_token, self.slice_end_token = slice_start, slice_end
        self.unk_token = unk
        self.im_id_start, self.im_id_end = im_id_start, im_id_end
        self.slice_mode = slice_mode
        self.use_image_id = use_image_id
        self.mean = list(norm_mean or [0.5, 0.5, 0.5])
        self.std = list(norm_std or [0.5, 0.5, 0.5])
        self.version = version

    def get_sliced_grid(self, image_size, max_slice_nums=None, nerver_split=False):
        return None

    def get_slice_image_placeholder(self, image_size, image_idx=0, max_slice_nums=None,
                                    use_image_id=None):
        return self.im_start_token + self.unk_token * self.image_feature_size + \\
            self.im_end_token

    def preprocess(self, images, **kwargs):
        raise NotImplementedError("the wshard test checkpoint processes no images")
'''


def make_v26(out):
    make(out, "2.6")


def make_v40(out):
    make(out, "4.0")


def make_v45(out):
    make(out, "4.5")
