"""Sizes and shapes as the command line writes them: 1e7, 10M, 256M, 1.5G, 3,32,32. No I/O, no numpy."""

from __future__ import annotations

import math
import re

from iobench.errors import IobenchError

DEFAULT_SIZE = 200_000  # samples in the default dataset: about 104 MB per format, a first run in about a minute
QUICK_SIZE = 10**5  # a first look in seconds: about 52 MB per format (the study used 10**6, 520 MB)
_SIZE_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def parse_size(text: str, option: str = "--size", unit: str = "samples") -> int:
    """Accept 1e7, 10000000, 10_000_000 and 10M (k/M/G/T are powers of 1000); a refusal names `option`."""
    s = str(text).strip().replace("_", "")
    m = re.fullmatch(r"([0-9.eE+-]+)\s*([kKmMgGtT]?)", s)
    if not m:
        raise IobenchError(f"{option}: cannot parse size {text!r}: use e.g. 1e7, 10000000, 10_000_000 or 10M")
    try:
        value = float(m.group(1)) * _SIZE_SUFFIXES[m.group(2).lower()]
    except ValueError:
        raise IobenchError(f"{option}: cannot parse size {text!r}: use e.g. 1e7, 10000000, 10_000_000 or 10M") from None
    if not math.isfinite(value) or value != int(value):
        raise IobenchError(f"{option} must be a whole number of {unit}, got {text!r}")
    if value <= 0:
        raise IobenchError(f"{option} must be positive, got {text!r}")
    return int(value)


def parse_bytes(text: str, option: str = "size") -> int:
    """Sizes in bytes with binary suffixes: 1G = 2**30, 256M, 64K, or a plain number."""
    s = str(text).strip().upper().removesuffix("IB").removesuffix("B")
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    try:
        value = float(s[:-1]) * units[s[-1]] if s and s[-1] in units else float(s)
    except ValueError:
        raise IobenchError(f"{option}: cannot parse size {text!r}: use e.g. 1G, 256M or 1048576") from None
    if not math.isfinite(value) or value <= 0:
        raise IobenchError(f"{option} must be positive, got {text!r}")
    return int(value)


def parse_shape(text: str) -> tuple[int, ...]:
    """Accept 128, 3,32,32 or 3x32x32."""
    parts = re.split(r"\s*[,x]\s*", str(text).strip())
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise IobenchError(f"cannot parse shape {text!r}: use e.g. 128 or 3,32,32") from None
    if not shape or any(d <= 0 for d in shape):
        raise IobenchError(f"shape must be positive integers, got {text!r}")
    return shape


def count_of(value: object, option: str, low: int, high: int) -> int:
    """A count checked against its bounds in one line (the command line's parser checks the same bounds first)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise IobenchError(f"{option}: a whole number from {low:,} to {high:,}, got {value!r}")
    return value
