"""A format defined outside iobench, as a plug-in package would: the npy layout under another name."""

from iobench.formats.npy import NpyFormat


class ToyFormat(NpyFormat):
    name = "toy"


class NotAFormat:
    name = "broken"
