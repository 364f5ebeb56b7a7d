"""BharatGen Param-2 (Param2MoEForCausalLM: bharatgenai/Param2-17B-A2.4B-
Thinking) as its release ships it, tiny: Ling 2.0's tensors under Ling's
names (BharatGen's nemo_to_hf is Ling's converter with model_type
param2moe), built by ckpt_bailing_moe.make with the release's differences:
tied embeddings (no lm_head.weight), two shared experts whose width
together is moe_shared_expert_intermediate_size, and its own remote config
class (no config class in transformers 5.19 or vLLM 0.32: vLLM needs
trust_remote_code).  The router's expert_bias has an offset every expert
shares, as trained ones do, so vLLM's zero-mean of it on loading changes
every value.  Variant: bias_dtype ("BF16": the bias in BF16, as a
converter that casts everything writes it; the release keeps Megatron's
F32).  No tokenizer: vLLM runs token-id prompts with skip_tokenizer_init.
"""
import os

import ckpt_bailing_moe
from ckpt_io import remote_config_py

# The release's configuration_param2moe.py is Ling 2.0's class (BharatGen's
# converter is Ling's) under its own name and model_type: the same keys and
# defaults.
PARAM2_CONFIG_PY = remote_config_py(
    "Param2MoEConfig", "param2moe",
    """Param2MoEConfig: the keys and defaults of Param-2's
configuration_param2moe.py (Ling 2.0's), written for the wshard test checkpoints.""",
    ckpt_bailing_moe.V2_DEFAULTS, ckpt_bailing_moe.V2_DERIVED)


def make(out, bias_dtype=None):
    import torch
    from ckpt_io import update_config
    ckpt_bailing_moe.make(out, tie=True, shared=2, bias_mean=0.7,
                          bias_dtype=torch.bfloat16 if bias_dtype == "BF16" else None)
    os.remove(os.path.join(out, "configuration_bailing_moe_v2.py"))

    def param2(c):
        # bharatgenai/Param2-17B-A2.4B-Thinking's keys (nemo_to_hf gen_config)
        c.update(architectures=["Param2MoEForCausalLM"], model_type="param2moe",
                 auto_map={"AutoConfig": "configuration_param2moe.Param2MoEConfig",
                           "AutoModel": "modeling_param2moe.Param2MoEModel",
                           "AutoModelForCausalLM": "modeling_param2moe.Param2MoEForCausalLM"},
                 rope_theta=500000, eos_token_id=3, partial_rotary_factor=1.0,
                 transformers_version="4.52.3")
        for k in ("num_nextn_predict_layers", "mtp_loss_scaling_factor", "use_rmsnorm"):
            c.pop(k, None)
    update_config(out, param2)
    with open(os.path.join(out, "configuration_param2moe.py"), "w") as f:
        f.write(PARAM2_CONFIG_PY)


def make_bf16_bias(out):
    make(out, bias_dtype="BF16")
