"""A numpy-only stand-in for the part of kaldi-native-fbank that vLLM
0.32's FireRedASR2 feature extractor calls (transformers_utils/processors/
fireredasr2.py:44-66: FbankOptions, OnlineFbank's accept_waveform,
num_frames_ready and get_frame), which the engine's venv does not have
(it is not among vLLM's CPU requirements).  oracle.py puts this folder on
the path of FireRedASR2's engine runs only, and only where
kaldi_native_fbank itself cannot be imported.  Its features are log
energies of 25 ms frames every 10 ms (snip_edges: whole frames only)
pooled into num_bins bands of the power spectrum, not Kaldi's mel
filterbank: the reference run and the runs of wshard's output use the
same features, so their answers still differ only if the weights do."""
import numpy as np


class _Opts:
    pass


class FbankOptions:
    def __init__(self):
        self.frame_opts = _Opts()
        self.frame_opts.dither = 0.0
        self.frame_opts.snip_edges = True
        self.frame_opts.samp_freq = 16000
        self.frame_opts.frame_length_ms = 25.0
        self.frame_opts.frame_shift_ms = 10.0
        self.mel_opts = _Opts()
        self.mel_opts.num_bins = 80
        self.mel_opts.debug_mel = False


class OnlineFbank:
    def __init__(self, opts):
        self.opts = opts
        self.frames = []

    def accept_waveform(self, sample_rate, wave):
        x = np.asarray(wave, dtype=np.float64)
        f = self.opts.frame_opts
        n = int(sample_rate * f.frame_length_ms / 1000)
        hop = int(sample_rate * f.frame_shift_ms / 1000)
        bins = self.opts.mel_opts.num_bins
        count = 0 if len(x) < n else 1 + (len(x) - n) // hop
        window = np.hanning(n)
        for i in range(count):
            frame = x[i * hop:i * hop + n]
            power = np.abs(np.fft.rfft((frame - frame.mean()) * window)) ** 2
            bands = np.array_split(power[1:], bins)
            self.frames.append(np.log(np.array([b.sum() for b in bands]) + 1e-6))

    @property
    def num_frames_ready(self):
        return len(self.frames)

    def get_frame(self, i):
        return self.frames[i]
