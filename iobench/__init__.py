"""iobench: how fast does training data travel from disk to the device in PyTorch?"""

__version__ = "0.1.0"
