"""vLLM's three InternVL derivatives in their releases' remote-code layouts,
tiny, as vLLM 0.32 reads them: each is ckpt_internvl_chat.py's checkpoint
(InternVLChatModel's names: vision_model.*, mlp1.*, language_model.*) with
the release's config.json and configuration code, and where the release
differs, its tensors.

make_h2ovl: H2OVLChatModel (h2oai/h2ovl-mississippi-2b: model_type
    h2ovl_chat, llm_config MistralForCausalLM (H2O-Danube2-1.8B), InternViT-300M;
    vLLM's h2ovl.py changes only the processor (MSAC tiling, use_msac); the
    tensors are InternVLChatModel's).  make_h2ovl_800m: h2ovl-mississippi-800m's
    form, a LlamaForCausalLM text model (H2O-Danube3-500M).
make_skywork_r1v: SkyworkR1VChatModel (Skywork/Skywork-R1V-38B, R1V2, R1V3:
    model_type skywork_chat, InternViT-6B (25 heads: 5 here, whole at tp 2),
    Qwen2 text model (DeepSeek-R1-Distill-Qwen-32B); skyworkr1v.py's
    projector holds ReplicatedLinear with biases under the same names).
make_nvlm_d: NVLM_D (nvidia/NVLM-D-72B: architectures ["NVLM_D"], model_type
    NVLM_D, vLLM's NVLM_D_Model).  Its InternViT-6B-448px-V1-5 carries 7 dummy
    heads (Megatron trained it at tp 8, 25 + 7 = 32 heads), and the release
    holds them: attn.qkv [3*(H+7)*hd, Hv] (q's H+7 heads, the 7 dummy ones
    last, then k's, then v's), attn.q_norm / k_norm [(H+7)*hd], attn.proj
    [Hv, (H+7)*hd]; its projector mlp1 is LayerNorm(4*Hv), Linear(4*Hv,
    llm intermediate_size, bias=False), GELU, Linear(intermediate, hidden,
    bias=False).  Here the 5-head tower gets 7 more heads (12: cut at tp 2);
    make_nvlm_d_h4 a 4-head one (11 heads: whole at tp 2, where 4 heads
    would be cut).  The dummy rows are random here (zeros in Megatron's
    initialisation) so that every byte of their cut is checked.

Tokenizers: H2OVL and Skywork-R1V use InternVL's <img>, </img>,
<IMG_CONTEXT> (vLLM's H2OVLProcessor, InternVLProcessor), as
ckpt_internvl_chat.py writes them; NVLM's processor (vLLM's
transformers_utils/processors/nvlm_d.py) <Image>, </Image>, <|vision_pad|>
and the tile tags <tile_1>..<tile_6>, <tile_global_thumbnail>, and it
replaces the text "<image>\\n" (the word-level tokenizer drops the newline:
<image> alone, 994).

    ckpt_internvl_derivs.py OUT h2ovl|h2ovl_800m|skywork_r1v|nvlm_d|nvlm_d_h4
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ckpt_internvl_chat as cic  # noqa: E402

cic.LLM_ARCH.setdefault("mistral", "MistralForCausalLM")


def config_py(cls, model_type, mistral=False):
    """The release's configuration module, in the form of
    ckpt_internvl_chat.py's CHAT_PY: InternVLChatConfig's keys under the
    release's class name and model type."""
    text = cic.CHAT_PY % {"internlm2_import": "InternLM2Config = None"}
    for a, b in (("class InternVLChatConfig(", "class %s(" % cls),
                 ('model_type = "internvl_chat"', 'model_type = "%s"' % model_type)):
        assert text.count(a) == 1, a
        text = text.replace(a, b)
    if mistral:
        a = '"Qwen2ForCausalLM": "qwen2",'
        assert text.count(a) == 1
        text = text.replace(a, a + ' "MistralForCausalLM": "mistral",')
    return text


def rewrite_config(out, fn, code):
    """Turns the config.json ckpt_internvl_chat.make wrote into the
    release's (fn changes the dict), and its configuration code into the
    release's files (code: file name -> text)."""
    from ckpt_io import write_release_config
    c = json.load(open(os.path.join(out, "config.json")))
    fn(c)
    os.remove(os.path.join(out, "configuration_internvl_chat.py"))
    code = dict(code, **{"configuration_intern_vit.py": cic.VIT_PY})
    write_release_config(out, c, code)


def make_h2ovl(out, llm="mistral"):
    cic.make(out, llm=llm, vit="300m")

    def fn(c):
        c["architectures"] = ["H2OVLChatModel"]
        c["model_type"] = "h2ovl_chat"
        c["auto_map"] = {"AutoConfig": "configuration_h2ovl_chat.H2OVLChatConfig",
                         "AutoModel": "modeling_h2ovl_chat.H2OVLChatModel",
                         "AutoModelForCausalLM": "modeling_h2ovl_chat.H2OVLChatModel"}
        # the release: template h2ogpt2, use_msac true; MSAC tiles a single
        # image at 3 to max_dynamic_patch tiles, which a 1-tile test image
        # cannot: off here (vLLM's processor reads the key either way)
        c["template"] = "h2ogpt2" if llm == "mistral" else "h2ogpt3"
        c["use_msac"] = False
        if llm == "mistral":
            # H2O-Danube2 has no sliding window
            c["llm_config"]["sliding_window"] = None
    rewrite_config(out, fn, {"configuration_h2ovl_chat.py":
                             config_py("H2OVLChatConfig", "h2ovl_chat", mistral=True)})


def make_h2ovl_800m(out):
    make_h2ovl(out, llm="llama")


def make_skywork_r1v(out):
    cic.make(out, llm="qwen2", vit="6b")

    def fn(c):
        c["architectures"] = ["SkyworkR1VChatModel"]
        c["model_type"] = "skywork_chat"
        c["auto_map"] = {"AutoConfig": "configuration_skywork_chat.SkyworkChatConfig",
                         "AutoModel": "modeling_skywork_chat.SkyworkR1VChatModel",
                         "AutoModelForCausalLM": "modeling_skywork_chat.SkyworkR1VChatModel"}
        c["template"] = "skywork-r1v-chat"
    rewrite_config(out, fn, {"configuration_skywork_chat.py":
                             config_py("SkyworkChatConfig", "skywork_chat")})


NVLM_DUMMY_HEADS = 7


def make_nvlm_d(out, vit="6b"):
    import torch
    from ckpt_io import noise, perturb, rewrite_shards
    cic.make(out, llm="qwen2", vit=vit)
    v = cic.VITS[vit]
    hv, heads = v["hidden_size"], v["num_attention_heads"]
    hd = hv // heads
    pad = NVLM_DUMMY_HEADS * hd
    from make_ckpt import COMMON
    g = torch.Generator().manual_seed(4321)
    rnd = noise(g, s=0.02, dtype=torch.bfloat16)
    # the projector as NVLM's modeling_nvlm_d.py builds it
    torch.manual_seed(4321)
    mlp1 = torch.nn.Sequential(
        torch.nn.LayerNorm(4 * hv),
        torch.nn.Linear(4 * hv, COMMON["intermediate_size"], bias=False),
        torch.nn.GELU(),
        torch.nn.Linear(COMMON["intermediate_size"], COMMON["hidden_size"], bias=False),
    ).to(torch.bfloat16)
    perturb(mlp1)
    proj = {"mlp1." + k: t.detach().clone().contiguous() for k, t in mlp1.state_dict().items()}

    def shard(tensors):
        for name in list(tensors):
            t = tensors[name]
            if name.endswith(".attn.qkv.weight") or name.endswith(".attn.qkv.bias"):
                # each of q, k, v followed by its 7 dummy heads
                parts = t.chunk(3)
                tensors[name] = torch.cat(
                    [torch.cat([p, rnd(pad, *p.shape[1:])]) for p in parts]).contiguous()
            elif name.endswith(".attn.q_norm.weight") or name.endswith(".attn.k_norm.weight"):
                tensors[name] = torch.cat([t, rnd(pad, base=1.0)]).contiguous()
            elif name.endswith(".attn.proj.weight"):
                tensors[name] = torch.cat([t, rnd(t.shape[0], pad)], 1).contiguous()
            elif name.startswith("mlp1."):
                del tensors[name]
                if name in proj:
                    tensors[name] = proj.pop(name)
    rewrite_shards(out, shard)
    assert not proj, sorted(proj)

    def fn(c):
        c["architectures"] = ["NVLM_D"]
        c["model_type"] = "NVLM_D"
        c["auto_map"] = {"AutoConfig": "configuration_nvlm_d.NVLM_D_Config",
                         "AutoModel": "modeling_nvlm_d.NVLM_D_Model",
                         "AutoModelForCausalLM": "modeling_nvlm_d.NVLM_D_Model"}
        c["template"] = "chatml"
        # the release tiles (dynamic_image_size, max_dynamic_patch 6) and adds
        # a thumbnail: NVLM's processor tags each tile, the thumbnail with
        # <tile_global_thumbnail>, and a single tile only so
        c["use_thumbnail"] = True
    rewrite_config(out, fn, {"configuration_nvlm_d.py": config_py("NVLM_D_Config", "NVLM_D")})
    nvlm_tokenizer(out)


def make_nvlm_d_h4(out):
    """NVLM-D with a 4-head tower: 11 heads with the dummy ones, which tp 2
    does not divide (vLLM keeps that attention whole) though it divides 4."""
    make_nvlm_d(out, vit="6b4")


def nvlm_tokenizer(out):
    import types
    from make_ckpt import COMMON, word_tokenizer
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        p = os.path.join(out, f)
        if os.path.exists(p):
            os.remove(p)
    special = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3,
               "<Image>": 997, "</Image>": 996, "<|vision_pad|>": 999,
               "<image>": 994, "<tile_global_thumbnail>": 993}
    for i in range(1, 7):
        special["<tile_%d>" % i] = 986 + i
    cfg = types.SimpleNamespace(get_text_config=lambda: types.SimpleNamespace(
        vocab_size=COMMON["vocab_size"]))
    word_tokenizer(cfg, special, "<pad>", "<eos>", "<bos>", "<unk>").save_pretrained(out)


if __name__ == "__main__":
    globals()["make_" + sys.argv[2]](sys.argv[1])
