"""A stand-in for mispeech's MiDashengLMProcessor (the release's
processing_midashenglm.py, remote code), enough for vLLM 0.32's MiDashengLM
processor (midashenglm.py:524-666): the audio token and its bracketing
tokens (<|AUDIO|> between <|audio_bos|> and <|audio_eos|>), a feature
extractor whose sampling rate the data parser reads, and for sound the
waveforms themselves, zero-padded to the longest (input_values), with each
one's length in samples (audio_length); vLLM expands the audio token by
those lengths itself.  Written into the test checkpoint of MiDashengLM and
named by its processor_config.json's auto_map (ckpt_midashenglm.py)."""
import numpy as np
from transformers import BatchFeature, ProcessorMixin


class MiDashengLMProcessor(ProcessorMixin):
    audio_token = "<|AUDIO|>"
    audio_bos_token = "<|audio_bos|>"
    audio_eos_token = "<|audio_eos|>"

    def __init__(self, feature_extractor=None, tokenizer=None, **kwargs):
        super().__init__(feature_extractor, tokenizer)

    def __call__(self, text=None, audio=None, audios=None, return_tensors=None, **kwargs):
        audio = audio if audio is not None else audios
        if isinstance(text, str):
            text = [text]
        data = dict(self.tokenizer(text or [""], add_special_tokens=False))
        if audio is not None:
            waves = [np.asarray(a, dtype=np.float32).reshape(-1) for a in audio]
            longest = max(len(w) for w in waves)
            data["input_values"] = np.stack([np.pad(w, (0, longest - len(w))) for w in waves])
            data["audio_length"] = np.array([len(w) for w in waves], dtype=np.int64)
        return BatchFeature(data, tensor_type=return_tensors)
