"""A shard's bytes handed to `tarfile`, each member header checked before tarfile reads what it declares.

webdataset reads a shard with `tarfile.open(fileobj=..., mode="r|*")` and each member whole into memory:
a compressed shard inflates as it is read (a 20 MB gzip stream held a 4 GiB member), and a header (or a
pax record before it) may declare any size. What webdataset's ShardWriter writes is known: a plain tar of
regular files, each after a pax header with its times, none larger than one encoded sample. So every
header is parsed as its bytes pass, before tarfile sees them, and anything else is refused in one line.
"""

from __future__ import annotations

import io
import os
import re

BLOCK = 512
MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
REGULAR = (b"0", b"\0")
PAX = b"x"
PAX_KEYS = frozenset({"mtime", "atime", "ctime"})  # what tarfile writes for ShardWriter's float mtime
MAX_PAX = BLOCK  # a pax record of times fits one block
END = bytes(BLOCK)  # a zero block ends the archive
SIZE_FIELD = re.compile(rb" *([0-7]+)[\0 ]*")  # octal digits, padded as tarfile pads them


class ShardError(ValueError):
    """A shard that is not what webdataset's ShardWriter writes; says which and why in one line."""


class CheckedTar(io.RawIOBase):
    """Read-only bytes of one shard (a descriptor opened by `open_regular`, or a pipe from a download, closed with
    this object); `limit`, where given, is the most bytes the shard may hold (its size by the manifest)."""

    def __init__(self, fd: int, name: str, max_member: int, limit: int | None = None, first: bytes = b"") -> None:
        super().__init__()
        self.fd, self.name, self.max_member, self.limit = fd, name, max_member, limit
        self.first = first  # bytes of the stream already read from `fd` (a download's first block), handed out first
        self.pos = 0  # bytes handed out
        self.next = 0  # where the next header starts; -1 once the end-of-archive block was seen
        self.head = bytearray()  # the header (and its pax record) at self.next, gathered so far
        self.need = BLOCK  # bytes of it to gather before it is checked

    def __repr__(self) -> str:  # webdataset names the stream in its messages
        return self.name

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self.first:
            n = min(len(buffer), len(self.first))
            buffer[:n], self.first = self.first[:n], self.first[n:]
        else:
            n = os.readv(self.fd, [buffer])
        if self.limit is not None and self.pos + n > self.limit:
            raise ShardError(f"{self.name}: more than the {self.limit:,} bytes the manifest lists")
        self._check(memoryview(buffer)[:n])
        self.pos += n
        return n

    def close(self) -> None:
        if not self.closed and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        super().close()

    def _check(self, data: memoryview) -> None:
        if self.pos == 0 and len(data):
            for magic, kind in MAGIC.items():
                if bytes(data[: len(magic)]) == magic:
                    raise ShardError(
                        f"{self.name}: a {kind}-compressed tar; shards are plain tar, as ShardWriter writes"
                    )
        end = self.pos + len(data)
        while 0 <= self.next + len(self.head) < end:
            at = self.next + len(self.head) - self.pos
            if not self.head and at + self.need <= len(data):  # whole in this read: checked where it is
                self._header(data[at : at + self.need])
                continue
            self.head += data[at : at + self.need - len(self.head)]
            if len(self.head) < self.need:
                return
            if self._header(bytes(self.head)):
                self.head = bytearray()

    def _header(self, view: bytes | memoryview) -> bool:
        """A whole header (and, once its size is known, its pax record): check it and move to the next one
        (True), or, for a pax header, ask for its record too (`need`) and wait for it (False)."""
        head = bytes(view[:BLOCK])
        if head == END:
            self.next = -1  # the end: tarfile stops reading members here
            return True
        kind, size = head[156:157], _size(head, self.name)
        if kind == PAX and self.need == BLOCK:
            if size > MAX_PAX:
                raise ShardError(f"{self.name}: a pax header of {size} bytes (those ShardWriter writes hold times)")
            self.need = BLOCK + size  # gather the record too, then check it
            if size:
                return False
        if kind == PAX:
            _check_pax(bytes(view[BLOCK : BLOCK + size]), self.name)
        elif kind not in REGULAR:
            raise ShardError(f"{self.name}: a member of type {kind!r}; ShardWriter writes regular files only")
        elif size > self.max_member:
            raise ShardError(f"{self.name}: a member of {size:,} bytes; a sample's is at most {self.max_member:,}")
        self.next += BLOCK + -(-size // BLOCK) * BLOCK
        self.need = BLOCK
        return True


def _size(head: bytes, name: str) -> int:
    """A header's size field: octal digits, as tarfile writes sizes below 8 GiB (base-256 is refused)."""
    found = SIZE_FIELD.fullmatch(head, 124, 136)
    if found is None:
        raise ShardError(f"{name}: a member header with size field {bytes(head[124:136])!r}")
    return int(found[1], 8)


def _check_pax(record: bytes, name: str) -> None:
    """`LEN key=value\\n` records, each a time: a pax `size` or `path` would override the next header."""
    pos = 0
    while pos < len(record):
        length, _, rest = record[pos:].partition(b" ")
        if not length.isdigit() or int(length) < 4 or pos + int(length) > len(record):
            raise ShardError(f"{name}: a malformed pax record")
        key = rest.partition(b"=")[0].decode("ascii", errors="replace")
        if key not in PAX_KEYS:
            raise ShardError(f"{name}: a pax record sets {key!r}; ShardWriter's set only times")
        pos += int(length)
