"""Named network profiles for object storage on loopback: the first-byte latency every request waits and the
bandwidth one connection may use. A record stores the profile's name and both numbers."""

from __future__ import annotations

from dataclasses import dataclass, replace

from iobench.errors import IobenchError


@dataclass(frozen=True)
class Profile:
    name: str
    latency_ms: float  # added before the first byte of every response
    connection_mb_per_s: float | None  # per connection (10^6 bytes/s); None: unshaped

    def describe(self) -> str:
        bandwidth = f"{self.connection_mb_per_s:g} MB/s per connection" if self.connection_mb_per_s else "no cap"
        return f"{self.name} ({self.latency_ms:g} ms first byte, {bandwidth})"

    def options(self) -> str:
        """The command-line options that give this profile (its name, and the numbers it overrides)."""
        named = PROFILES.get(self.name, Profile(self.name, -1.0, None))
        text = f"--remote {self.name}"
        if named.latency_ms != self.latency_ms:
            text += f" --latency-ms {self.latency_ms:g}"
        if self.connection_mb_per_s is not None and named.connection_mb_per_s != self.connection_mb_per_s:
            text += f" --connection-mb-per-s {self.connection_mb_per_s:g}"
        return text

    @property
    def shaped(self) -> bool:
        return self.latency_ms > 0 or self.connection_mb_per_s is not None


PROFILES = {
    # AWS S3 standard: tens of ms to the first byte; AWS's guidance is one request per 85-90 MB/s
    "s3-like": Profile("s3-like", 30.0, 90.0),
    # S3 Express One Zone: single-digit ms
    "express-like": Profile("express-like", 5.0, 90.0),
    # the server as fast as it goes on this machine
    "none": Profile("none", 0.0, None),
}


def profile(name: str, latency_ms: float | None = None, connection_mb_per_s: float | None = None) -> Profile:
    """A named profile, with either number overridden (`--latency-ms`, `--connection-mb-per-s`)."""
    if name not in PROFILES:
        raise IobenchError(f"unknown profile {name!r}; known: {', '.join(PROFILES)}")
    chosen = PROFILES[name]
    if latency_ms is not None:
        if not 0 <= latency_ms <= 10_000:
            raise IobenchError(f"--latency-ms {latency_ms:g}: expected 0 to 10000")
        chosen = replace(chosen, latency_ms=latency_ms)
    if connection_mb_per_s is not None:
        if not 0 < connection_mb_per_s <= 100_000:
            raise IobenchError(f"--connection-mb-per-s {connection_mb_per_s:g}: expected above 0, at most 100000")
        chosen = replace(chosen, connection_mb_per_s=connection_mb_per_s)
    return chosen
