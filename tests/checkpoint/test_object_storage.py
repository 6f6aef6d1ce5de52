"""Checkpoints on object storage: `--remote PROFILE` saves and restores through iobench's writable store on loopback
(moto's server behind the shaper), `--endpoint-url` through a store iobench did not start (moto's server here): torch
through S3Checkpoint and DCP through S3StorageWriter/Reader, safetensors as bytes put and got, each exact, in place and
safely, with the requests and bytes the shaper counted; nothing left in the bucket after. Skipped, with the reason,
where s3torchconnector, moto's server or nginx is missing; `.ci/run` installs them."""

from __future__ import annotations

import json

import pytest

from iobench.errors import IobenchError
from iobench.storage.remote.emulator import nginx_binary
from tests.checkpoint.test_checkpoint import session
from tests.storage.test_emulator import importlib_missing
from tests.storage.test_endpoint import moto_url  # noqa: F401 - the fixture

NEEDS = "pip install 'iobench[checkpoint-s3]'"


def _nginx() -> str | None:
    try:
        nginx_binary()
    except IobenchError as exc:
        return str(exc)
    return None


pytestmark = [
    pytest.mark.skipif(
        importlib_missing("s3torchconnector") or importlib_missing("moto") or importlib_missing("tenacity"),
        reason=f"s3torchconnector[dcp] or moto's server is not installed ({NEEDS})",
    ),
    pytest.mark.extras,
]
LIBRARIES = ("torch", "dcp", "safetensors")


@pytest.mark.skipif(_nginx() is not None, reason=_nginx() or "")
def test_remote_saves_and_restores_exact_and_counts_what_moved(cli, tmp_path):
    results = tmp_path / "r.jsonl"
    r = cli(
        "checkpoint",
        "--remote",
        "s3-like",
        "--params",
        "2e5",
        "--rounds",
        "1",
        "--libraries",
        ",".join(LIBRARIES),
        "--device",
        "cpu",
        "--dir",
        tmp_path / "c",
        "--results",
        results,
    )
    assert r.code == 0, r.err
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert {x["library"] for x in records} == set(LIBRARIES) and {x["target"] for x in records} == {"object"}
    restores = [x for x in records if x["op"] == "restore"]
    assert [x["cache"] for x in restores] == ["cold"] * 3 and all(x["exact"] for x in restores)
    for x in records:  # the shaper's count: a save put at least the checkpoint twice (its first and steady saves)
        moved = x["bytes_received"] if x["op"] == "save" else x["bytes_sent"]
        assert moved >= (2 if x["op"] == "save" else 1) * x["bytes_on_disk"] > 0 and sum(x["requests"].values()) > 0
    assert {x["save_mode"] for x in records if x["op"] == "save"} == {"inplace", "safe"}
    assert "object storage: a restore reads from the store" in r.err


def test_a_store_at_an_endpoint_holds_nothing_of_the_run_after(moto_url, tmp_path, monkeypatch):  # noqa: F811
    import boto3

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")  # moto takes any keys
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client(
        "s3",
        endpoint_url=moto_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket="ckpt")
    done = session(tmp_path, libraries=LIBRARIES, endpoint_url=f"{moto_url}/ckpt", caches=("cold",))
    assert all(r.exact for r in done.trials if r.op == "restore") and len(done.trials) == 9
    assert {r.store for r in done.trials} == {moto_url.removeprefix("http://")}
    assert client.list_objects_v2(Bucket="ckpt").get("KeyCount") == 0, "the run's objects are removed"


def test_keep_k_on_a_bucket_publishes_each_step_and_removes_the_oldest_through_the_target(
    moto_url,  # noqa: F811
    monkeypatch,
):
    """The save modes' pointer, steps and removals through the place's target as a trial reaches it (`trial_target`:
    s3torchconnector's client, the keys from its environment): keep:2 over four saves leaves the newest two steps,
    `latest` naming the last."""
    import boto3

    from iobench.checkpoint import save_modes
    from iobench.results.checkpoint_record import SaveMode
    from iobench.storage.checkpoints import CheckpointPlace
    from iobench.storage.trial_targets import trial_target

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")  # moto takes any keys
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    client = boto3.client(
        "s3", endpoint_url=moto_url, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="t"
    )
    client.create_bucket(Bucket="ckpt")
    place, mode = CheckpointPlace(url="s3://ckpt/run/torch", endpoint=moto_url), SaveMode.keeping(2)
    store = trial_target(place)
    root = save_modes.root_of(place, mode)
    for n in range(1, 5):
        saved = save_modes.save_place(store, place, mode)
        assert saved.url == f"s3://ckpt/run/torch/keep-2/step-{n}"
        client.put_object(Bucket="ckpt", Key=saved.url.removeprefix("s3://ckpt/") + "/state.pt", Body=b"x" * 100)
        save_modes.publish(store, root, saved)
        assert save_modes.current(store, place, mode) == saved
        assert save_modes.remove_beyond(store, root, mode.steps_kept) == (1 if n > 2 else 0)
    assert sorted(store.names(root)) == ["latest", "step-3", "step-4"]
