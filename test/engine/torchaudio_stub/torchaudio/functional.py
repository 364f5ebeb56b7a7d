"""torchaudio.functional's spectrogram, melscale_fbanks (HTK scale, no
norm) and amplitude_to_DB, as torchaudio 2.x computes them, in torch."""
import math

import torch


def spectrogram(waveform, pad, window, n_fft, hop_length, win_length, power, normalized,
                center=True, pad_mode="reflect", onesided=True):
    if pad > 0:
        waveform = torch.nn.functional.pad(waveform, (pad, pad), "constant")
    shape = waveform.size()
    waveform = waveform.reshape(-1, shape[-1])
    spec = torch.stft(waveform, n_fft=n_fft, hop_length=hop_length, win_length=win_length,
                      window=window, center=center, pad_mode=pad_mode, normalized=False,
                      onesided=onesided, return_complex=True)
    spec = spec.reshape(shape[:-1] + spec.shape[-2:])
    if normalized:
        spec = spec / window.pow(2.0).sum().sqrt()
    if power is None:
        return spec
    return spec.abs() if power == 1.0 else spec.abs().pow(power)


def _hz_to_mel(freq, mel_scale):
    if mel_scale == "htk":
        return 2595.0 * math.log10(1.0 + freq / 700.0)
    # Slaney's: linear below 1 kHz, logarithmic above
    mels = freq / (200.0 / 3)
    if freq >= 1000.0:
        mels = 1000.0 / (200.0 / 3) + math.log(freq / 1000.0) / (math.log(6.4) / 27.0)
    return mels


def _mel_to_hz(mels, mel_scale):
    if mel_scale == "htk":
        return 700.0 * (10 ** (mels / 2595.0) - 1.0)
    min_log_mel, logstep = 1000.0 / (200.0 / 3), math.log(6.4) / 27.0
    freqs = (200.0 / 3) * mels
    return torch.where(mels >= min_log_mel,
                       1000.0 * torch.exp(logstep * (mels - min_log_mel)), freqs)


def melscale_fbanks(n_freqs, f_min, f_max, n_mels, sample_rate, norm=None, mel_scale="htk"):
    # (MiDashengLM calls it with the HTK scale and no norm, Cohere
    # Transcribe's feature extractor with Slaney's scale and norm)
    if mel_scale not in ("htk", "slaney") or norm not in (None, "slaney"):
        raise NotImplementedError("the stand-in has the HTK and Slaney scales only")
    if f_max is None:
        f_max = float(sample_rate // 2)
    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs)
    m_pts = torch.linspace(_hz_to_mel(f_min, mel_scale), _hz_to_mel(f_max, mel_scale),
                           n_mels + 2)
    f_pts = _mel_to_hz(m_pts, mel_scale)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down = -1.0 * slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    fb = torch.max(torch.zeros(1), torch.min(down, up))
    if norm == "slaney":
        fb = fb * (2.0 / (f_pts[2:n_mels + 2] - f_pts[:n_mels])).unsqueeze(0)
    return fb


def amplitude_to_DB(x, multiplier, amin, db_multiplier, top_db=None):
    x_db = multiplier * torch.log10(torch.clamp(x, min=amin))
    x_db -= multiplier * db_multiplier
    if top_db is not None:
        shape = x_db.size()
        packed = shape[-3] if x_db.dim() > 2 else 1
        x_db = x_db.reshape(-1, packed, shape[-2], shape[-1])
        x_db = torch.max(x_db, (x_db.amax(dim=(-3, -2, -1)) - top_db).view(-1, 1, 1, 1))
        x_db = x_db.reshape(shape)
    return x_db
