"""probing: what do the attention heads of BERT-family encoders do?"""

__version__ = "0.1.0"
