"""A stand-in for OpenMOSS's MOSS-Audio config class (the release's
configuration code, remote code, model_type moss_audio, which neither
transformers nor vLLM 0.32 registers), enough for vLLM's MossAudioModel
(moss_audio.py:266-306, 1511-1521: a config that is not its own
MossAudioConfig is rebuilt from audio_config, language_config,
adapter_hidden_size and deepstack_num_inject_layers): the audio encoder's
settings as a dict, the text model's as a Qwen3Config, the text model's
sizes copied to the top as vLLM's class copies them, and get_text_config
giving language_config.  Written into the test checkpoint of MOSS-Audio and
named by its config.json's auto_map (ckpt_moss_audio.py)."""
from transformers import PretrainedConfig, Qwen3Config


class MossAudioConfig(PretrainedConfig):
    model_type = "moss_audio"

    def __init__(self, audio_config=None, language_config=None, adapter_hidden_size=8192,
                 ignore_index=-100, deepstack_num_inject_layers=None, **kwargs):
        self.audio_config = dict(audio_config or {})
        if isinstance(language_config, Qwen3Config):
            self.language_config = language_config
        else:
            self.language_config = Qwen3Config(**(language_config or {}))
        self.adapter_hidden_size = adapter_hidden_size
        self.ignore_index = ignore_index
        self.deepstack_num_inject_layers = deepstack_num_inject_layers
        for key in ("num_hidden_layers", "eos_token_id", "bos_token_id", "vocab_size"):
            kwargs.setdefault(key, getattr(self.language_config, key, None))
        kwargs.setdefault("tie_word_embeddings", False)
        super().__init__(**kwargs)
        for key in ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                    "max_position_embeddings", "rms_norm_eps"):
            if hasattr(self.language_config, key):
                setattr(self, key, getattr(self.language_config, key))

    def get_text_config(self, decoder=None, encoder=None):
        return self.language_config
