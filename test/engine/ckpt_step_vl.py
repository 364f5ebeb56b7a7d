"""StepFun's StepVL (StepVLForConditionalGeneration, stepfun-ai's Step3-VL
10B form, remote code), tiny, as vLLM 0.32 reads it (model_executor/models/
step_vl.py, a Step3VLForConditionalGeneration subclass, and qwen3.py).

The model: the Perception Encoder tower and its projector as Step-3.7's
(transformers' Step3p7ForConditionalGeneration builds them and its
save_pretrained writes the release's names: vision_model.conv1, ln_pre,
positional_embedding, vit_downsampler1/2, vision_model.transformer.
resblocks.N.{attn.in_proj_weight/bias, attn.out_proj, ln_1, ln_2,
ls_1/ls_2.gamma, mlp.c_fc, mlp.c_proj}, vit_large_projector.weight; its
text model dropped) and the text model of text_config, transformers'
Qwen3ForCausalLM, under the release's model.* and lm_head.* (vLLM's
hf_to_vllm_mapper puts them under language_model.).  The tower: 2 blocks
of 64 (4 heads, MLP 128), 56-pixel images in 14-pixel patches.

config.json as the release writes it (vision_config's width/heads/layers
... as step_vl.py reads them, text_config a Qwen3 config, projector_bias,
image_token_id), auto_map to configuration_step_vl.py beside it, a minimal
configuration for trust_remote_code (neither transformers nor vLLM 0.32
knows the model type).  A word-level tokenizer with the image tokens of
vLLM's Step-3 VL processor, which the model inherits from Step3VL; the
prompts are text alone (that processor sizes images for the release's
728-pixel tower): the tower is checked by bytes.
"""
import os

CONFIG_PY = '''"""StepVL's configuration, minimal, written for the wshard test
checkpoints: a Perception Encoder vision config and a Qwen3 text config."""
from transformers import AutoConfig
from transformers.configuration_utils import PretrainedConfig


class StepVLVisionConfig(PretrainedConfig):
    model_type = "step_vl_vision"

    def __init__(self, width=1536, layers=47, heads=16, image_size=728, patch_size=14,
                 mlp_ratio=8960 / 1536, hidden_act="quick_gelu", ls_init_value=0.1,
                 output_dim=None, use_abs_posemb=True, use_cls_token=False,
                 use_ln_pre=True, use_ln_post=False, use_rope2d=True, **kwargs):
        super().__init__(**kwargs)
        self.width, self.layers, self.heads = width, layers, heads
        self.image_size, self.patch_size, self.mlp_ratio = image_size, patch_size, mlp_ratio
        self.hidden_act, self.ls_init_value, self.output_dim = hidden_act, ls_init_value, output_dim
        self.use_abs_posemb, self.use_cls_token = use_abs_posemb, use_cls_token
        self.use_ln_pre, self.use_ln_post, self.use_rope2d = use_ln_pre, use_ln_post, use_rope2d


class StepVLConfig(PretrainedConfig):
    model_type = "step_vl"
    is_composition = True

    def __init__(self, vision_config=None, text_config=None, projector_bias=False,
                 image_token_id=151679, understand_projector_stride=2, **kwargs):
        vision_config = dict(vision_config or {})
        vision_config.pop("model_type", None)
        self.vision_config = StepVLVisionConfig(**vision_config)
        text_config = dict(text_config or {"model_type": "qwen3"})
        self.text_config = AutoConfig.for_model(text_config.pop("model_type", "qwen3"),
                                                **text_config)
        self.projector_bias = projector_bias
        self.image_token_id = image_token_id
        self.understand_projector_stride = understand_projector_stride
        self.hidden_size = self.text_config.hidden_size
        kwargs.setdefault("tie_word_embeddings", self.text_config.tie_word_embeddings)
        super().__init__(**kwargs)
'''

W, VH, VL, IMG, P = 64, 4, 2, 56, 14


def make(out, tied=False):
    import torch
    import transformers
    from ckpt_io import written_tensors, save_shards, write_release_config
    from ckpt_step3p7 import step3_tokenizer
    from make_ckpt import COMMON
    V, H = COMMON["vocab_size"], COMMON["hidden_size"]
    image_token = V - 1
    vc = dict(width=W, layers=VL, heads=VH, image_size=IMG, patch_size=P, mlp_ratio=2.0,
              hidden_act="quick_gelu", ls_init_value=0.1)
    # the tower and projector from transformers' Step-3.7 (its text model a
    # one-layer stand-in, dropped)
    stc = dict(vocab_size=V, hidden_size=H, intermediate_size=COMMON["intermediate_size"],
               num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
               max_position_embeddings=512, n_routed_experts=4, num_experts_per_tok=2,
               moe_intermediate_size=128, share_expert_dim=128, layer_types=["full_attention"],
               mlp_layer_types=["dense"], tie_word_embeddings=False, pad_token_id=0)
    scfg = transformers.Step3p7Config(vision_config=vc, text_config=stc,
                                      image_token_id=image_token, projector_bias=False)
    tcfg = transformers.Qwen3Config(**dict(COMMON, tie_word_embeddings=tied,
                                           bos_token_id=2, eos_token_id=1, pad_token_id=0))
    torch.manual_seed(1234)
    s37 = transformers.Step3p7ForConditionalGeneration(scfg).to(torch.bfloat16)
    text = transformers.Qwen3ForCausalLM(tcfg).to(torch.bfloat16)
    with torch.no_grad():
        for m in (s37, text):
            for p in m.parameters():
                p.normal_(0, 0.02) if p.dim() > 1 else p.add_(torch.randn_like(p) * 0.02)
    sd = written_tensors(s37.save_pretrained)[0]
    sd = {k: v for k, v in sd.items() if k.startswith(("vision_model.", "vit_large_projector"))}
    assert "vision_model.transformer.resblocks.0.attn.in_proj_weight" in sd, sorted(sd)
    assert sd["vit_large_projector.weight"].shape == (H, 4 * W)
    for k, t in text.state_dict().items():
        if tied and k == "lm_head.weight":
            continue
        sd[k] = t.detach().clone().contiguous()
    os.makedirs(out, exist_ok=True)
    groups = [sorted(k for k in sd if k.startswith(("vision_model.", "vit_large_projector"))),
              sorted(k for k in sd if k.startswith("model."))]
    groups.append(sorted(k for k in sd if k.startswith("lm_head.")))
    groups = [g for g in groups if g]
    assert sum(len(g) for g in groups) == len(sd)
    save_shards(out, sd, groups)
    tc = tcfg.to_dict()
    tc = {k: tc[k] for k in ("architectures", "model_type", "vocab_size", "hidden_size",
                             "intermediate_size", "num_hidden_layers", "num_attention_heads",
                             "num_key_value_heads", "head_dim", "max_position_embeddings",
                             "rms_norm_eps", "hidden_act", "tie_word_embeddings",
                             "bos_token_id", "eos_token_id", "pad_token_id") if k in tc}
    tc["architectures"] = ["Qwen3ForCausalLM"]
    tc["rope_theta"] = 1000000.0
    vision = dict(vc, output_dim=None, use_abs_posemb=True, use_cls_token=False,
                  use_ln_pre=True, use_ln_post=False, use_rope2d=True)
    c = {"architectures": ["StepVLForConditionalGeneration"], "model_type": "step_vl",
         "auto_map": {"AutoConfig": "configuration_step_vl.StepVLConfig"},
         "projector_bias": False, "image_token_id": image_token,
         "understand_projector_stride": 2, "text_config": tc, "vision_config": vision,
         "tie_word_embeddings": tied, "torch_dtype": "bfloat16"}
    write_release_config(out, c, {"configuration_step_vl.py": CONFIG_PY})
    step3_tokenizer(out, V, image_token, {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3})


def make_tied(out):
    """text_config.tie_word_embeddings: no lm_head.weight in the release."""
    make(out, tied=True)


if __name__ == "__main__":
    import sys
    make(sys.argv[1])
