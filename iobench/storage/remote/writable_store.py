"""A writable S3 store on loopback for what iobench writes (a checkpoint's saves): moto's server, in memory, behind
the same nginx shaper as the read-only emulator (the profile's latency and per-connection cap, one access-log line per
request with the bytes each way). rclone's `serve s3` answers s3torchconnector's CreateMultipartUpload and its
client then fails ("A previous write operation did not complete successfully", rclone 1.6x and the CRT of
s3torchconnector 1.5), so the emulator's rclone serves reads and moto serves writes.

Both listen on 127.0.0.1 only, on free ports, with keys made for this start that reach the clients through their
environment. Loopback is no boundary on a shared host (moto itself checks no signature): moto runs behind
`signed_gate`, which answers only requests signed with those keys, whichever port they come to. Both die with this
process and are stopped on every exit path (the emulator's state folder and stale
removal: moto's command line names the state folder)."""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass

from iobench.errors import IobenchError
from iobench.storage.remote.emulator import ShapedStore, free_port, nginx_binary, wait_listening
from iobench.storage.remote.endpoint import Endpoint
from iobench.storage.remote.signed_gate import KEYS_VARIABLE
from iobench.system.processes import python_module

MOTO_INSTALL = "pip install 'iobench[checkpoint-s3]'"


@dataclass
class WritableStore(ShapedStore):
    """`with WritableStore(profile, bucket) as endpoint:` a store holding one empty bucket, gone at the exit."""

    bucket: str = "iobench"

    def _start(self) -> None:
        check_moto()
        nginx_binary()  # both found before anything starts
        upstream = free_port()
        access, secret = "IOBENCH" + secrets.token_hex(8).upper(), secrets.token_hex(20)
        # the keys through the environment (never the command line); the state folder named for stale removal
        env = {**os.environ, KEYS_VARIABLE: f"{access}:{secret}"}
        argv = python_module("iobench.storage.remote.signed_gate", "127.0.0.1", str(upstream), str(self.state))
        self._spawn("moto", argv, env)
        wait_listening(upstream, self._processes[-1], self.state / "moto.out")
        port = self._shaper(upstream)
        self.endpoint = Endpoint(f"http://127.0.0.1:{port}", access, secret, bucket=self.bucket)
        make_bucket(self.endpoint, self.bucket)

    @property
    def settings(self) -> str:
        return "moto server (in memory); nginx shaper"


def check_moto() -> None:
    import importlib.util

    if importlib.util.find_spec("moto") is None or importlib.util.find_spec("flask") is None:
        raise IobenchError(f"--remote for checkpoints needs moto's server: {MOTO_INSTALL}")


def make_bucket(endpoint: Endpoint, bucket: str, timeout_s: float = 10.0) -> None:
    """The bucket made (moto answers a moment after it listens)."""
    client = s3_client(endpoint)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.create_bucket(Bucket=bucket)
            return
        except Exception as exc:  # botocore's errors: said in one line once the time is up
            if time.monotonic() > deadline:
                raise IobenchError(f"the checkpoint store did not make its bucket: {str(exc)[:200]}") from None
            time.sleep(0.1)


def s3_client(endpoint: Endpoint) -> object:
    """boto3's S3 client of the store, with iobench's timeouts (what lists and removes a checkpoint's objects)."""
    import boto3

    from iobench.storage.remote import bounds

    return boto3.client(
        "s3",
        endpoint_url=endpoint.url,
        aws_access_key_id=endpoint.access_key,
        aws_secret_access_key=endpoint.secret_key,
        region_name=endpoint.region,
        config=bounds.botocore_config(s3={"addressing_style": "path"}, signature_version="s3v4"),
    )
