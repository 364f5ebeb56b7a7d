"""A tiny Nemotron-H Puzzle checkpoint (NemotronHPuzzleForCausalLM), as
NVIDIA's Puzzle-searched Nemotron-H releases lay it out: Nemotron-H's
tensor names (backbone.*), and config.json's block_configs giving each
layer its kind and, for MoE and MLP layers, sizes of its own, read through
the release's remote-code config class (model_type nemotron_h_puzzle,
NemotronHPuzzleConfig, whose get_nemotron_h_config_for_layer vLLM 0.32's
nemotron_h.py asks for each layer's config).

The weights are transformers' own NemotronHForCausalLM's (layers M E * E -
-, 4 experts of 128, MLPs of 128), then cut to the blocks' sizes: layer 3
keeps experts 0-1 of 64 rows (its router's rows, correction bias and shared
expert alike), layer 4's MLP 64.  The top-level MoE keys stay as the
release's conversion writes them (the first MoE block's).  make(out)
writes it into OUT; make_dense(out) one without MoE layers."""

import json
import os

from ckpt_io import rewrite_shards, write_release_config

# The release's config class, as its remote code behaves under
# transformers 5: each block's keys over the top-level ones
CONFIG_PY = '''from huggingface_hub.dataclasses import strict
from transformers.models.nemotron_h.configuration_nemotron_h import NemotronHConfig

KINDS = {"mamba": "linear_attention", "moe": "moe", "attention": "full_attention",
         "mlp": "mlp"}


@strict
class NemotronHPuzzleConfig(NemotronHConfig):
    model_type = "nemotron_h_puzzle"
    block_configs: list | None = None
    mtp_block_configs: list | None = None

    def __post_init__(self, **kwargs):
        if self.block_configs:
            kwargs.pop("hybrid_override_pattern", None)
            self.layers_block_type = [KINDS[b["block_type"]] for b in self.block_configs]
        super().__post_init__(**kwargs)

    def get_nemotron_h_config_for_layer(self, layer_idx):
        blocks = list(self.block_configs or []) + list(self.mtp_block_configs or [])
        values = self.to_dict()
        for key in ("block_configs", "mtp_block_configs", "model_type", "auto_map",
                    "architectures"):
            values.pop(key, None)
        values.update({k: v for k, v in blocks[layer_idx].items()
                       if k != "block_type" and v is not None})
        config = NemotronHConfig(**values)
        config._attn_implementation = self._attn_implementation
        return config
'''

# block_type: transformers' layers_block_type, and hybrid_override_pattern
KINDS = {"mamba": "linear_attention", "moe": "moe", "attention": "full_attention",
         "mlp": "mlp"}
PATTERN = {"mamba": "M", "moe": "E", "attention": "*", "mlp": "-"}
MOE = {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 128,
       "moe_shared_expert_intermediate_size": 128}
BLOCKS = [{"block_type": "mamba"},
          dict(MOE, block_type="moe"),
          {"block_type": "attention"},
          dict(MOE, block_type="moe", n_routed_experts=2, num_experts_per_tok=1,
               moe_intermediate_size=64, moe_shared_expert_intermediate_size=64),
          {"block_type": "mlp", "intermediate_size": 64},
          {"block_type": "mlp", "intermediate_size": 128}]


def cut(tensors, blocks):
    """The tensors of transformers' model cut to the sizes of blocks."""
    for name in list(tensors):
        if not name.startswith("backbone.layers."):
            continue
        n = int(name.split(".")[2])
        b = blocks[n]
        rest = name.split(".", 3)[3]
        t = tensors[name]
        if b["block_type"] == "moe":
            ne, i, si = (b["n_routed_experts"], b["moe_intermediate_size"],
                         b["moe_shared_expert_intermediate_size"])
            if rest.startswith("mixer.experts."):
                if int(rest.split(".")[2]) >= ne:
                    del tensors[name]
                    continue
                t = t[:i] if rest.endswith("up_proj.weight") else t[:, :i]
            elif rest in ("mixer.gate.weight", "mixer.gate.e_score_correction_bias"):
                t = t[:ne]
            elif rest == "mixer.shared_experts.up_proj.weight":
                t = t[:si]
            elif rest == "mixer.shared_experts.down_proj.weight":
                t = t[:, :si]
        elif b["block_type"] == "mlp":
            i = b["intermediate_size"]
            if rest == "mixer.up_proj.weight":
                t = t[:i]
            elif rest == "mixer.down_proj.weight":
                t = t[:, :i]
        tensors[name] = t.contiguous()


def make(out, blocks=BLOCKS):
    import make_ckpt
    make_ckpt.learn_rules().make_checkpoint("NemotronHForCausalLM", out, {
        "layers_block_type": [KINDS[b["block_type"]] for b in blocks],
        "intermediate_size": 128, **MOE, "n_shared_experts": 1})
    rewrite_shards(out, lambda tensors: cut(tensors, blocks))
    with open(os.path.join(out, "config.json")) as f:
        c = json.load(f)
    c.pop("layers_block_type", None)
    c.update(architectures=["NemotronHPuzzleForCausalLM"], model_type="nemotron_h_puzzle",
             auto_map={"AutoConfig": "configuration_nemotron_h_puzzle.NemotronHPuzzleConfig"},
             block_configs=blocks, mtp_block_configs=[],
             hybrid_override_pattern="".join(PATTERN[b["block_type"]] for b in blocks),
             num_nextn_predict_layers=0)
    write_release_config(out, c, {"configuration_nemotron_h_puzzle.py": CONFIG_PY})


def make_dense(out):
    """A Puzzle model without MoE layers (vLLM's CPU build runs it): M * - -,
    the MLPs 64 and 128 wide."""
    make(out, [{"block_type": "mamba"}, {"block_type": "attention"},
               {"block_type": "mlp", "intermediate_size": 64},
               {"block_type": "mlp", "intermediate_size": 128}])
