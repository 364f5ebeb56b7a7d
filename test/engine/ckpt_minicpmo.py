"""MiniCPM-o 2.6 in openbmb's remote-code layout (architectures
["MiniCPMO"], model_type minicpmo: openbmb/MiniCPM-o-2_6), tiny, as vLLM
0.32 reads it (model_executor/models/minicpmo.py: MiniCPMO dispatches on
config.json's version to MiniCPMO2_6 (MiniCPMV2_6's Qwen2 text model,
SigLIP tower and resampler) or MiniCPMO4_5 (MiniCPMV4_5's)).

MiniCPM-V 2.6's parts are ckpt_minicpmv.py's; beside them:

    apm.*      transformers' WhisperEncoder (2 layers of 4 heads of 16, FFN
               256, 80 mel bins, 1500 positions), the release's Whisper
               encoder (vLLM's MiniCPMWhisperEncoder is transformers' class
               with its own layers of the same names)
    audio_projection_layer.linear1 / linear2 (weight, bias)
               the release's MultiModalProjector: encoder_ffn_dim // 4
               (= d_model, 64) to 256 to 256
    tts.*      a few tensors under the release's ChatTTS names (emb_text,
               projector, a Llama layer's q_proj, the norm), which vLLM's
               mapper drops ({"tts": None})

config.json holds the release's keys (audio_config with model_type
whisper, audio_pool_step, audio_chunk_length, tts_config, init_vision /
init_audio / init_tts) with a minimal MiniCPMOConfig beside it for
trust_remote_code.  The stand-in processor (processing_minicpmo.py) holds
a Whisper feature extractor, which vLLM's MiniCPMOProcessingInfo takes;
the oracle prompts with text alone (the towers and projectors are compared
by bytes).
"""
import ckpt_minicpmv

AUDIO = dict(d_model=64, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=256,
             decoder_layers=2, decoder_attention_heads=4, decoder_ffn_dim=256,
             num_mel_bins=80, max_source_positions=1500)

CONFIG_O_PY = '''

class MiniCPMOConfig(MiniCPMVConfig):
    model_type = "minicpmo"

    def __init__(self, audio_config=None, tts_config=None, audio_pool_step=2,
                 audio_chunk_length=1.0, stream_input=False, init_vision=True,
                 init_audio=True, init_tts=True, **kwargs):
        from transformers import WhisperConfig
        if isinstance(audio_config, dict) or audio_config is None:
            ac = dict(audio_config or {})
            ac.pop("model_type", None)
            self.audio_config = WhisperConfig(**ac)
        else:
            self.audio_config = audio_config
        self.tts_config = dict(tts_config or {})
        self.audio_pool_step = audio_pool_step
        self.audio_chunk_length = audio_chunk_length
        self.stream_input = stream_input
        self.init_vision = init_vision
        self.init_audio = init_audio
        self.init_tts = init_tts
        super().__init__(**kwargs)
'''


def parts(torch, cfg_cls, hidden):
    """The audio tower, its projector and the TTS head's stand-in tensors,
    config.json's audio keys, the configuration code, the audio tokens."""
    import transformers
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    from ckpt_io import module_tensors
    acfg = transformers.WhisperConfig(**AUDIO)
    d_in = AUDIO["encoder_ffn_dim"] // 4
    proj = torch.nn.ModuleDict({"linear1": torch.nn.Linear(d_in, hidden),
                                "linear2": torch.nn.Linear(hidden, hidden)})
    tensors = module_tensors({"apm": WhisperEncoder(acfg), "audio_projection_layer": proj})
    g = torch.Generator().manual_seed(7)
    tts = {"tts.emb_text.weight": (32, 48), "tts.projector.linear1.weight": (48, hidden),
           "tts.projector.linear2.weight": (48, 48),
           "tts.model.layers.0.self_attn.q_proj.weight": (48, 48), "tts.model.norm.weight": (48,)}
    for k, shape in tts.items():
        tensors[k] = (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)
    ac = {k: v for k, v in acfg.to_dict().items()
          if k in AUDIO or k in ("activation_function", "scale_embedding")}
    cfg = {"architectures": ["MiniCPMO"], "model_type": "minicpmo",
           "auto_map": {"AutoConfig": "configuration_minicpm.MiniCPMOConfig",
                        "AutoModel": "modeling_minicpmo.MiniCPMO",
                        "AutoModelForCausalLM": "modeling_minicpmo.MiniCPMO"},
           "audio_config": dict(sorted(dict(ac, model_type="whisper").items())),
           "audio_pool_step": 2, "audio_chunk_length": 1.0, "stream_input": False,
           "init_vision": True, "init_audio": True, "init_tts": True,
           "tts_config": {"model_type": "conditional_chattts", "llm_dim": hidden,
                          "hidden_size": 48, "num_hidden_layers": 1}}
    code = ckpt_minicpmv.CONFIG_PY % {"base": cfg_cls} + CONFIG_O_PY
    return tensors, cfg, code, {"<audio>": 991, "</audio>": 990}


def make(out):
    ckpt_minicpmv.make(out, "2.6", omni=parts)
