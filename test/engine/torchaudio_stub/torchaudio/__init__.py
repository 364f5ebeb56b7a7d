"""A torch-only stand-in for the three functions of torchaudio.functional
that vLLM 0.32's MiDashengLM imports at module level (midashenglm.py:34:
spectrogram, melscale_fbanks, amplitude_to_DB in DashengFrontend), which
the engine's venv does not have (torchaudio is not among vLLM's CPU
requirements), the melscale_fbanks that vLLM's own Cohere Transcribe
feature extractor imports (transformers_utils/processors/cohere_asr.py:11,
Slaney's scale and norm), and compliance.kaldi's fbank, which vLLM's FunASR
feature extractor imports (compliance/kaldi.py).  oracle.py puts this
folder on the path of MiDashengLM's, Cohere Transcribe's and FunASR's engine
runs only, and only where torchaudio itself cannot be imported; the
reference run and the runs of wshard's output use the same functions, so
their answers still differ only if the weights do."""
from . import functional  # noqa: F401
