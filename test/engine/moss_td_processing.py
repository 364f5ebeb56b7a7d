"""A stand-in for OpenMOSS's MOSS-Transcribe-Diarize processor (the
release's processing code, remote code), enough for vLLM 0.32's processor
(moss_transcribe_diarize.py:380-570): a WhisperFeatureExtractor beside the
tokenizer (the data parser reads its sampling rate, the token count its
n_samples and hop_length), the audio tokens (audio_start_token,
audio_end_token, audio_token_id, _audio_span_ids) and, for sound, each
sound cut in chunks of the extractor's n_samples, each chunk's mel
features padded to a whole chunk (input_features), its tokens
(audio_feature_lengths: vLLM's own count, _compute_total_audio_tokens,
:162-180) and its sound (audio_chunk_mapping); vLLM expands the
placeholder itself.  Written into the test checkpoint of
MOSS-Transcribe-Diarize and named by its processor_config.json's auto_map
(ckpt_moss_td.py)."""
import numpy as np
from transformers import BatchFeature, ProcessorMixin


class MossTranscribeDiarizeProcessor(ProcessorMixin):
    audio_start_token = "<|audio_start|>"
    audio_end_token = "<|audio_end|>"
    audio_pad_token = "<|audio_pad|>"

    def __init__(self, feature_extractor=None, tokenizer=None, audio_merge_size=4,
                 **kwargs):
        self.audio_merge_size = audio_merge_size
        super().__init__(feature_extractor, tokenizer)

    @property
    def audio_token_id(self):
        return self.tokenizer.convert_tokens_to_ids(self.audio_pad_token)

    def _audio_span_ids(self, n):
        return [self.audio_token_id] * n

    def __call__(self, text=None, audio=None, audios=None, return_tensors=None, **kwargs):
        audio = audio if audio is not None else audios
        if isinstance(text, str):
            text = [text]
        data = dict(self.tokenizer(text or [""], add_special_tokens=False))
        if audio:
            fe = self.feature_extractor
            n = int(fe.n_samples)
            stride = int(fe.hop_length) * 2 * self.audio_merge_size
            feats, lens, owner = [], [], []
            for i, a in enumerate(audio):
                a = np.asarray(a, dtype=np.float32).reshape(-1)
                for s in range(0, len(a), n):
                    piece = a[s:s + n]
                    f = fe(piece, sampling_rate=fe.sampling_rate, padding="max_length",
                           return_tensors="np")
                    feats.append(f["input_features"][0])
                    lens.append((len(piece) - 1) // stride + 1)
                    owner.append(i)
            data["input_features"] = np.stack(feats)
            data["audio_feature_lengths"] = np.array(lens, dtype=np.int64)
            data["audio_chunk_mapping"] = np.array(owner, dtype=np.int64)
        return BatchFeature(data, tensor_type=return_tensors)
