"""The readers' cache folders: their size at a snapshot and the most they held between two (an evicting cache
is small again at the epoch's end)."""

from __future__ import annotations

import pickle
import time

from iobench.storage.remote.cache_watch import INTERVAL_S, CachePeak, folder_bytes


def test_a_take_returns_the_size_now_and_the_most_since_the_last_take(tmp_path):
    folder = tmp_path / "cache"
    peak = CachePeak([folder])
    assert peak.take() == (0, 0), "a folder not made yet holds nothing"
    folder.mkdir()
    (folder / "chunk-0.bin").write_bytes(b"x" * 1000)
    (folder / "sub").mkdir()
    (folder / "sub" / "chunk-1.bin").write_bytes(b"x" * 500)
    (folder / "link").symlink_to(folder / "chunk-0.bin")  # not counted twice
    peak.sample()
    (folder / "chunk-0.bin").unlink()
    assert peak.take() == (500, 1500)
    assert peak.take() == (500, 500), "the next peak starts from the size at the take"
    assert folder_bytes(folder) == 500


def test_the_watching_thread_sees_a_file_that_is_gone_before_the_take(tmp_path):
    folders: list = []
    peak = CachePeak(folders)
    with peak.watching():
        folders.append(tmp_path)  # a reader made after the run started adds its folder
        (tmp_path / "chunk.bin").write_bytes(b"x" * 4096)
        time.sleep(10 * INTERVAL_S)
        (tmp_path / "chunk.bin").unlink()
    assert peak.take() == (0, 4096)


def test_a_storage_handed_to_a_worker_carries_the_folders_not_the_lock(tmp_path):
    peak = CachePeak([tmp_path])
    (tmp_path / "a").write_bytes(b"12345")
    copy = pickle.loads(pickle.dumps(peak))
    assert copy.folders == [tmp_path] and copy.take() == (5, 5)


def test_a_folder_removed_while_it_is_walked_counts_what_was_seen(tmp_path, monkeypatch):
    """datasets removes its cache folder at the end of a stream, between the check that it is a folder and the
    walk: the watching thread died with a traceback and sampled no more."""
    from pathlib import Path

    (tmp_path / "chunk.bin").write_bytes(b"x" * 300)

    def vanishing(self, pattern):
        yield tmp_path / "chunk.bin"
        raise FileNotFoundError(2, "No such file or directory", str(self))

    monkeypatch.setattr(Path, "rglob", vanishing)
    assert folder_bytes(tmp_path) == 300
    peak = CachePeak([tmp_path])
    with peak.watching():
        time.sleep(5 * INTERVAL_S)
    assert peak.take() == (300, 300)
