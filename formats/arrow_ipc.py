"""An Arrow IPC stream checked before `datasets` maps it: the schema the writer leaves, uncompressed record
batches only, and the rows they declare.

`load_from_disk` reads every record batch of every data file at once: an uncompressed batch is only mapped,
but a compressed one is inflated into memory (a 1.1 MB file with an extra zstd column of 4 GiB was an OOM
kill), and a column the writer never writes is cast or refused deep inside the library. Here only the
messages' metadata is read (flatbuffers, a few hundred bytes a batch), from a memory map that is closed
before returning; no body is decoded.
"""

from __future__ import annotations

import struct
from typing import Any

RECORD_BATCH = 3  # MessageHeader union: Schema 1, DictionaryBatch 2, RecordBatch 3


def check_stream(path: str, schema: Any) -> int:
    """The rows of an IPC stream of uncompressed record batches of exactly `schema` (without metadata);
    ValueError naming what else it holds."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        with pa.memory_map(path) as source:
            messages = ipc.MessageReader.open_stream(source)
            found = ipc.read_schema(messages.read_next_message())
            if not found.remove_metadata().equals(schema.remove_metadata()):
                raise ValueError(f"a schema of {_fields(found)}; the writer's is {_fields(schema)}")
            rows = 0
            for message in messages:
                if message.type != "record batch":
                    raise ValueError(f"a {message.type} message (the writer writes record batches only)")
                rows += _uncompressed_rows(message.metadata.to_pybytes())
            return rows
    except (pa.ArrowException, StopIteration, struct.error, IndexError) as exc:
        raise ValueError(f"not an Arrow stream as the writer leaves it ({type(exc).__name__}: {exc})") from None


def _fields(schema: Any) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)


def _uncompressed_rows(metadata: bytes) -> int:
    """A RecordBatch message's row count (flatbuffers: Message.header -> RecordBatch.length), refusing one
    whose body is compressed (RecordBatch.compression present)."""
    message = _Table(metadata, struct.unpack_from("<I", metadata, 0)[0])
    if message.byte(1) != RECORD_BATCH:
        raise ValueError("a record batch message whose header is not a record batch")
    batch = message.table(2)
    if batch.has(3):
        raise ValueError(
            "a compressed record batch (the writer's are uncompressed; a compressed one is inflated into memory whole)"
        )
    return batch.long(0)


class _Table:
    """A flatbuffers table: a vtable of field offsets before it (soffset), fields little-endian."""

    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf, self.pos = buf, pos
        self.vtable = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vsize = struct.unpack_from("<H", buf, self.vtable)[0]

    def _at(self, field: int) -> int | None:
        slot = 4 + 2 * field
        if slot + 2 > self.vsize:
            return None
        offset = struct.unpack_from("<H", self.buf, self.vtable + slot)[0]
        return self.pos + offset if offset else None

    def has(self, field: int) -> bool:
        return self._at(field) is not None

    def byte(self, field: int) -> int:
        at = self._at(field)
        return self.buf[at] if at is not None else 0

    def long(self, field: int) -> int:
        at = self._at(field)
        return struct.unpack_from("<q", self.buf, at)[0] if at is not None else 0

    def table(self, field: int) -> _Table:
        at = self._at(field)
        if at is None:
            raise ValueError("a message without its header")
        return _Table(self.buf, at + struct.unpack_from("<I", self.buf, at)[0])
