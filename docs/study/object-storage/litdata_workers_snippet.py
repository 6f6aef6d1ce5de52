"""LitData's own loop, without iobench's loaders: StreamingDataset + StreamingDataLoader (shuffle, batch 256), the
samples it delivers within CAP seconds. From iobench's emulator (s3-like) by default, as `iobench run --remote`
opens it (LitData's boto3 path: its obstore path cannot reach an http:// endpoint); `--local` reads the folder.

Usage: python litdata_workers_snippet.py DATASET_DIR WORKERS CAP_SECONDS [--local]
"""

import sys
import tempfile
import time
from pathlib import Path

import litdata

from iobench.storage.remote.emulator import Emulator
from iobench.storage.remote.profiles import profile


def count(ds: litdata.StreamingDataset, workers: int, cap: float) -> str:
    started = time.perf_counter()
    n, first = 0, None
    for batch in litdata.StreamingDataLoader(ds, batch_size=256, num_workers=workers):
        n += len(batch["label"])
        first = first or time.perf_counter() - started
        if time.perf_counter() - started > cap:
            break
    seconds = time.perf_counter() - started
    rate = f"{n / seconds:,.0f} samples/s"
    return f"workers={workers}: {n} samples in {seconds:.1f} s = {rate}, first batch {first:.2f} s"


def main() -> None:
    dataset, workers, cap = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    if "--local" in sys.argv:
        print("local " + count(litdata.StreamingDataset(str(dataset / "litdata"), shuffle=True), workers, cap))
        return
    import litdata.streaming.downloader as downloader

    downloader._OBSTORE_AVAILABLE = False
    with Emulator(dataset.parent, profile("s3-like")) as ep, tempfile.TemporaryDirectory() as cache:
        s3 = {
            "endpoint_url": ep.url,
            "aws_access_key_id": ep.access_key,
            "aws_secret_access_key": ep.secret_key,
            "region_name": ep.region,
        }
        url = f"s3://{dataset.name}/litdata"
        print(count(litdata.StreamingDataset(url, cache_dir=cache, shuffle=True, storage_options=s3), workers, cap))


if __name__ == "__main__":
    main()
