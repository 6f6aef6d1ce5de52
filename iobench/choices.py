"""Choices on the command line: enums that read and write as their text, and comma lists
(`npy,hdf5`, `all`, `0,4,8`): one parser for every command."""

from __future__ import annotations

from enum import Enum

from iobench.errors import IobenchError


class Choice(str, Enum):
    """A command-line choice: compares and serialises as its text (records keep their strings)."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: str, option: str) -> Choice:
        """The member named by text (any case), or a one-line refusal naming the option."""
        try:
            return cls(str(text).strip().lower())
        except ValueError:
            raise IobenchError(f"{option} must be one of {', '.join(c.value for c in cls)}, got {text!r}") from None


def split_list(text: str, what: str) -> list[str]:
    """'a, B,,c' -> ['a', 'b', 'c']; an empty list is an error naming what was expected."""
    items = [x.strip().lower() for x in str(text).split(",") if x.strip()]
    if not items:
        raise IobenchError(f"no {what} given")
    return items


def parse_choices(text: str, known: tuple[str, ...], what: str) -> tuple[str, ...]:
    """Known names in the order given (duplicates dropped), or all of them for 'all'."""
    try:
        names = split_list(text, what)
    except IobenchError:
        raise IobenchError(f"no {what} given; choose from {', '.join(known)} or all") from None
    if "all" in names:
        return known
    for name in names:
        if name not in known:
            raise IobenchError(
                f"unknown {what} {name!r}{did_you_mean(name, known)}; choose from {', '.join(known)} or all"
            )
    return tuple(dict.fromkeys(names))


_BOOL = {"on": True, "true": True, "yes": True, "1": True, "off": False, "false": False, "no": False, "0": False}


def parse_ints(text: str, what: str, allow_default: bool = False) -> list[int | None]:
    """Whole numbers from a comma list ('default' or 'none' mean None where allowed)."""
    values: list[int | None] = []
    for x in split_list(text, f"--{what} value"):
        if allow_default and x in ("default", "none"):
            values.append(None)
            continue
        try:
            values.append(int(x))
        except ValueError:
            raise IobenchError(f"--{what}: {x!r} is not a whole number") from None
    return values


def parse_bools(text: str, what: str) -> list[bool]:
    try:
        return [_BOOL[x] for x in split_list(text, f"--{what} value")]
    except KeyError as exc:
        raise IobenchError(f"--{what}: {exc.args[0]!r} is not on or off") from None


def did_you_mean(name: str, known: tuple[str, ...] | list[str]) -> str:
    """', did you mean npy?' for a near miss (`nppy`), '' otherwise."""
    import difflib

    close = difflib.get_close_matches(name.lower(), list(known), n=1, cutoff=0.6)
    return f", did you mean {close[0]}?" if close else ""


class DeviceChoice(str):
    """--device as typed, its syntax checked once where it is parsed (no torch): auto, cpu, cuda or cuda:N, in lower
    case. Which device that is here is `iobench.system.devices.device_here`'s (the one "auto" rule)."""

    __slots__ = ()

    def __new__(cls, text: object) -> DeviceChoice:
        if isinstance(text, DeviceChoice):
            return text
        name = str(text).strip().lower()
        kind, colon, index = name.partition(":")
        if kind not in ("auto", "cpu", "cuda") or (colon and (kind != "cuda" or not index.isdigit() or len(index) > 4)):
            raise IobenchError(f"unknown device {str(text)[:40]!r}; use auto, cpu, cuda or cuda:N")
        return super().__new__(cls, name)

    @property
    def kind(self) -> str:
        """auto, cpu or cuda."""
        return self.partition(":")[0]

    @property
    def index(self) -> int | None:
        """N of cuda:N; None otherwise."""
        _, colon, index = self.partition(":")
        return int(index) if colon else None
