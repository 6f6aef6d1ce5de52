"""The shard check under every way tarfile may read: headers and pax records split across reads anywhere are
gathered and checked exactly as whole ones (a header checked where it lies in one read takes a faster path)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from iobench.formats.tar_stream import CheckedTar, ShardError

SIZES = [0, 1, 511, 512, 600, 5000]


def _shard(path: Path, pax: dict[str, str] | None = None) -> bytes:
    """A plain tar as ShardWriter writes it: a pax header of times before each member."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for k, size in enumerate(SIZES):
            info = tarfile.TarInfo(f"{k:06d}.bin")
            info.size, info.mtime = size, 1.5e9 + 0.25  # a float time: tarfile writes a pax record for it
            if pax is not None and k == 3:
                info.pax_headers = pax
            tar.addfile(info, io.BytesIO(bytes([k]) * size))
    path.write_bytes(out.getvalue())
    return out.getvalue()


def _read_all(path: Path, chunk: int, max_member: int = 10_000) -> tuple[bytes, CheckedTar]:
    tar = CheckedTar(os.open(path, os.O_RDONLY), path.name, max_member)
    got, buffer = bytearray(), bytearray(chunk)
    try:
        while n := tar.readinto(memoryview(buffer)):
            got += buffer[:n]
    finally:
        tar.close()
    return bytes(got), tar


@pytest.mark.parametrize("chunk", [1, 7, 100, 511, 512, 513, 1000, 1024, 10240])
def test_every_header_is_checked_whatever_the_reads(tmp_path, chunk):
    raw = _shard(tmp_path / "s.tar")
    got, tar = _read_all(tmp_path / "s.tar", chunk)
    assert got == raw and tar.next == -1, "the end-of-archive block reached through every header"
    with pytest.raises(ShardError, match="a member of 5,000 bytes; a sample's is at most 4,999"):
        _read_all(tmp_path / "s.tar", chunk, max_member=4999)


@pytest.mark.parametrize("chunk", [1, 7, 513, 10240])
def test_a_pax_record_setting_a_size_is_refused_whatever_the_reads(tmp_path, chunk):
    _shard(tmp_path / "s.tar", pax={"size": str(2**32)})
    with pytest.raises(ShardError, match="a pax record sets 'size'"):
        _read_all(tmp_path / "s.tar", chunk)


def test_a_size_field_that_is_not_octal_is_refused(tmp_path):
    raw = bytearray(_shard(tmp_path / "s.tar"))
    raw[1024 + 124 : 1024 + 136] = b"0000000009\0\0"[:12]  # the first member's header, after its pax header
    (tmp_path / "s.tar").write_bytes(bytes(raw))
    with pytest.raises(ShardError, match="a member header with size field"):
        _read_all(tmp_path / "s.tar", 10240)
