"""A format defined outside iobench, as a plug-in package would: the npy layout under another name."""

from iobench.formats.npy import NpyFormat


class ToyFormat(NpyFormat):
    name = "toy"


class NotAFormat:
    name = "broken"


class Raises(NpyFormat):
    """A plug-in with a bug: building it fails."""

    name = "raises"

    def __init__(self) -> None:
        raise RuntimeError("a bug in the plug-in")


class Exits(NpyFormat):
    name = "exits"

    def __init__(self) -> None:
        raise SystemExit(3)


class Interrupts(NpyFormat):
    name = "interrupts"

    def __init__(self) -> None:
        raise KeyboardInterrupt
