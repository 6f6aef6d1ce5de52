"""`iobench serve`: the data folder as S3 on loopback behind the network shaper, until Ctrl-C, for pointing
one's own pipeline (boto3, s3fs, LitData, ...) at the same endpoint and profile that `run --remote` reads."""

from __future__ import annotations

import signal
from pathlib import Path

from iobench.cli import options as o
from iobench.cli.app import app
from iobench.cli.console import out, say


@app.command("serve")
def serve_cmd(
    profile: o.ServeProfile = "s3-like",
    data_dir: o.DataDir = Path("data"),
    latency_ms: o.ServeLatencyMs = None,
    connection_mb_per_s: o.ServeConnectionMbPerS = None,
) -> None:
    """Serve --data-dir as S3 on 127.0.0.1 (rclone serve s3, read-only; each prepared dataset a bucket of its name,
    holding the files its manifest lists) behind nginx shaping every request to the profile; prints the endpoint,
    keys, the variables AWS SDKs read and each dataset's `--endpoint-url`. Ctrl-C or SIGTERM stops it."""
    from iobench.run.serving import serving_folder

    # A shell starts a background job with SIGINT ignored, and Python then leaves it so: serve said "Ctrl-C stops
    # it" and ignored it. Both signals end it here, whatever it inherited.
    signal.signal(signal.SIGINT, _stop)
    with serving_folder(data_dir, profile, latency_ms, connection_mb_per_s) as (endpoint, chosen, buckets):
        say(f"serving {data_dir.resolve()} as S3 at {endpoint.url}, {chosen.describe()}; Ctrl-C stops it")
        for name, value in endpoint.environment().items():
            out.print(f"export {name}={value}", highlight=False, soft_wrap=True, markup=False)
        out.print(f"# buckets: {', '.join(buckets) or 'none'}", highlight=False, soft_wrap=True, markup=False)
        for bucket in buckets:
            out.print(
                f"# iobench run --endpoint-url {endpoint.url}/{bucket} --dataset {bucket}",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )
        signal.pause()  # until a signal ends the command (Ctrl-C, SIGTERM); the emulator stops on the way out


@app.command("upload")
def upload_cmd(
    endpoint_url: o.UploadEndpoint,
    data_dir: o.DataDir = Path("data"),
    dataset: o.DatasetName = None,
    formats: o.UploadFormats = None,
) -> None:
    """Put a prepared dataset's formats into an S3-compatible store (keys from AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY): the bucket the URL's path names (http(s)://host:port/bucket), else the dataset's
    name; it must exist. Each format's files go under its name (under the dataset's name too, in a bucket the URL
    names: two datasets share it), as `run --endpoint-url` reads them. Only the files
    the manifest lists are sent, each checked inside its folder, a regular file of the manifest's size and content
    (hashed as it is sent); an upload interrupted or refused removes what it had sent."""
    from iobench.cli.console import ConsoleEvents
    from iobench.sessions.upload import UploadRequest, upload_session

    request = UploadRequest(endpoint_url=endpoint_url, data_dir=data_dir, dataset=dataset, formats=formats)
    outcome = upload_session(request, ConsoleEvents())
    say(f"{outcome.sent_bytes / 1e6:,.1f} MB in all to s3://{outcome.bucket}")


def _stop(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
