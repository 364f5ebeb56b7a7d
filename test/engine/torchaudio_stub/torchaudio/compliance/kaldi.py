"""torchaudio.compliance.kaldi's fbank, the one function vLLM 0.32's
FunASR feature extractor calls (transformers_utils/processors/funasr.py:8,
WavFrontend.forward), in torch: Kaldi's log mel filter banks (frames cut
with snip_edges, DC offset removed, pre-emphasis 0.97, the named window,
a power spectrum padded to a power of two, Kaldi's mel banks, log).
No dither (the test's feature extractor sets none).  A stand-in for the
engine oracle: the reference run and the runs of wshard's output compute
the same features, so their answers still differ only if the weights do."""
import math

import torch


def _mel(f):
    return 1127.0 * torch.log(1.0 + f / 700.0)


def _mel_banks(num_bins, padded, fs, low, high):
    high = high if high > 0 else fs / 2 + high
    fft_bins = padded // 2
    mel_low, mel_high = _mel(torch.tensor(float(low))), _mel(torch.tensor(float(high)))
    delta = (mel_high - mel_low) / (num_bins + 1)
    b = torch.arange(num_bins, dtype=torch.float32).unsqueeze(1)
    left, center, right = mel_low + b * delta, mel_low + (b + 1) * delta, mel_low + (b + 2) * delta
    mel = _mel(fs / padded * torch.arange(fft_bins, dtype=torch.float32)).unsqueeze(0)
    up = (mel - left) / (center - left)
    down = (right - mel) / (right - center)
    banks = torch.max(torch.zeros(1), torch.min(up, down))
    return torch.nn.functional.pad(banks, (0, 1))


def _window(kind, n):
    if kind == "hamming":
        return torch.hamming_window(n, periodic=False, alpha=0.54, beta=0.46)
    if kind == "hanning":
        return torch.hann_window(n, periodic=False)
    if kind == "povey":
        return torch.hann_window(n, periodic=False).pow(0.85)
    if kind == "rectangular":
        return torch.ones(n)
    raise NotImplementedError("the stand-in has no window '%s'" % kind)


def fbank(waveform, num_mel_bins=23, frame_length=25.0, frame_shift=10.0, dither=0.0,
          energy_floor=1.0, window_type="povey", sample_frequency=16000.0, snip_edges=True,
          low_freq=20.0, high_freq=0.0, preemphasis_coefficient=0.97, remove_dc_offset=True,
          use_log_fbank=True, use_power=True, **kwargs):
    if not snip_edges:
        raise NotImplementedError("the stand-in cuts frames with snip_edges only")
    wave = waveform[0].to(torch.float32)
    size = int(sample_frequency * frame_length * 0.001)
    shift = int(sample_frequency * frame_shift * 0.001)
    if wave.numel() < size:
        return torch.empty(0, num_mel_bins)
    frames = wave.unfold(0, size, shift).clone()
    if remove_dc_offset:
        frames = frames - frames.mean(dim=1, keepdim=True)
    if preemphasis_coefficient != 0.0:
        prev = torch.cat([frames[:, :1], frames[:, :-1]], dim=1)
        frames = frames - preemphasis_coefficient * prev
    frames = frames * _window(window_type, size).unsqueeze(0)
    padded = 1 << max(0, math.ceil(math.log2(size)))
    frames = torch.nn.functional.pad(frames, (0, padded - size))
    spec = torch.fft.rfft(frames).abs()
    if use_power:
        spec = spec.pow(2.0)
    feats = spec @ _mel_banks(num_mel_bins, padded, sample_frequency, low_freq, high_freq).T
    if use_log_fbank:
        feats = torch.max(feats, torch.tensor(torch.finfo(torch.float32).eps)).log()
    return feats
