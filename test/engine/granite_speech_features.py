"""A stand-in for transformers' GraniteSpeechFeatureExtractor
(feature_extraction_granite_speech.py), which needs torchaudio for its mel
spectrogram: the engine's venv has none.  The same features from torch
alone: a 512-point STFT of a 400-sample Hann window every 160 samples
(centred, reflect-padded), its power through 80 HTK mel filters
(transformers' mel_filter_bank, as torchaudio's MelSpectrogram), then the
release's log, clamp and stacking of frame pairs.  Written into the test
checkpoint of Granite Speech as granite_speech_features.py and named by its
preprocessor_config.json's auto_map (make_ckpt.py)."""
import torch
from transformers.audio_utils import mel_filter_bank
from transformers.models.granite_speech.feature_extraction_granite_speech import (
    GraniteSpeechFeatureExtractor)


class _MelSpectrogram:
    def __init__(self, sample_rate, n_fft, win_length, hop_length, n_mels):
        self.n_fft, self.win_length, self.hop_length = n_fft, win_length, hop_length
        self.window = torch.hann_window(win_length)
        self.fb = torch.from_numpy(mel_filter_bank(
            num_frequency_bins=n_fft // 2 + 1, num_mel_filters=n_mels, min_frequency=0.0,
            max_frequency=sample_rate / 2, sampling_rate=sample_rate, norm=None,
            mel_scale="htk")).float()

    def to(self, device):
        return self

    def __call__(self, audio):
        spec = torch.stft(audio, self.n_fft, self.hop_length, self.win_length,
                          self.window, center=True, pad_mode="reflect",
                          return_complex=True).abs().pow(2)
        return torch.matmul(spec.transpose(-1, -2), self.fb).transpose(-1, -2)


class GraniteSpeechFeatureExtractorStandIn(GraniteSpeechFeatureExtractor):
    def __init__(self, sampling_rate=16000, n_fft=512, win_length=400, hop_length=160,
                 n_mels=80, projector_window_size=15, projector_downsample_rate=5,
                 padding_value=0.0, **kwargs):
        kwargs.pop("feature_size", None)
        super(GraniteSpeechFeatureExtractor, self).__init__(
            feature_size=n_mels, sampling_rate=sampling_rate, padding_value=padding_value,
            **kwargs)
        self.melspec_kwargs = {"sample_rate": sampling_rate, "n_fft": n_fft,
                               "win_length": win_length, "hop_length": hop_length,
                               "n_mels": n_mels}
        self.mel_filters = _MelSpectrogram(**self.melspec_kwargs)
        self.projector_window_size = projector_window_size
        self.projector_downsample_rate = projector_downsample_rate

    def __call__(self, audios, device="cpu"):
        # the release's, without its torchaudio check
        from transformers.feature_extraction_utils import BatchFeature
        batched, lengths = self._get_audios_and_audio_lengths(audios)
        feats = self._extract_mel_spectrograms(batched, device=device)
        sizes = self._get_num_audio_features(lengths)
        mask = torch.arange(max(sizes)).view(1, -1) < torch.tensor(sizes).view(-1, 1)
        return BatchFeature(data={"input_features": feats, "audio_embed_sizes": sizes,
                                  "input_features_mask": mask})

    def _extract_mel_spectrograms(self, audio, device="cpu"):
        with torch.no_grad():
            mel = self.mel_filters(audio.float())
            logmel = mel.transpose(-1, -2).clip_(min=1e-10).log10_()
            mx = logmel.amax(dim=(-2, -1), keepdim=True)
            logmel = torch.maximum(logmel, mx - 8.0).div_(4).add_(1)
            if logmel.shape[1] % 2 == 1:
                logmel = logmel[:, :-1]
            return logmel.reshape(audio.shape[0], -1, 2 * logmel.shape[-1])
