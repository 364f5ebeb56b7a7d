"""torchaudio.compliance: the kaldi module alone (kaldi.py)."""
from . import kaldi  # noqa: F401
