"""crossalign: multilingual masked-LM pre-training with cross-lingual alignment objectives."""

__version__ = "0.1.0"
