"""`iobench serve`: the data folder as S3 on loopback behind the network shaper, until Ctrl-C, for pointing
one's own pipeline (boto3, s3fs, LitData, ...) at the same endpoint and profile that `run --remote` reads."""

from __future__ import annotations

import signal
from pathlib import Path

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.console import out, say
from iobench.errors import IobenchError


@app.command("serve")
def serve_cmd(
    profile: o.ServeProfile = "s3-like",
    data_dir: o.DataDir = Path("data"),
    latency_ms: o.LatencyMs = None,
    connection_mb_per_s: o.ConnectionMbPerS = None,
) -> None:
    """Serve --data-dir as S3 on 127.0.0.1 (rclone serve s3, read-only; each dataset a bucket) behind nginx
    shaping every request to the profile; prints the endpoint, keys and the variables AWS SDKs read."""
    from iobench.storage.remote.emulator import Emulator
    from iobench.storage.remote.profiles import profile as named

    chosen = named(profile, latency_ms, connection_mb_per_s)
    if not data_dir.is_dir():
        raise IobenchError(f"--data-dir {data_dir} is not a folder")
    with Emulator(data_dir, chosen) as endpoint:
        buckets = sorted(p.name for p in data_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
        say(f"serving {data_dir.resolve()} as S3 at {endpoint.url}, {chosen.describe()}; Ctrl-C stops it")
        for name, value in endpoint.environment().items():
            out.print(f"export {name}={value}", highlight=False, soft_wrap=True, markup=False)
        out.print(f"# buckets: {', '.join(buckets) or 'none'}", highlight=False, soft_wrap=True, markup=False)
        signal.pause()  # until a signal ends the command (Ctrl-C, SIGTERM); the emulator stops on the way out
