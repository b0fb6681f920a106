"""The fast, low-memory decode of Kineto JSON: msgspec with a schema of only the fields read.

``orjson.loads`` builds a dict per event with every key, and most events are never used
(``python_function`` is 88% of the xDiT trace's 229k events). Decoded into ``msgspec.Struct``
objects that declare only the fields :mod:`parsers.kineto.reader` reads, every other key is
skipped inside msgspec's C code, without Python objects.

Both paths must give the same frames, so the schema keeps the values exactly as orjson
would give them: scalar fields are ``Any`` (the same Python value; the column builder
converts it as before). Two kinds of value would differ: integers beyond 64 bits (orjson
rounds them to a float, msgspec keeps them exact) and non-string names (a string column
would spell them differently). So ``name`` must be a string, and the values read for a few
rows only (collective name and dtype, shapes) stay raw JSON bytes that orjson decodes for
those rows (:func:`lazy`). Anything else unexpected (an event that is not an object, ``args``
that is not an object) makes :func:`decode` return None and the reader takes the tolerant
orjson path, which skips or counts it.
"""

from __future__ import annotations

from typing import Any, Iterator

import msgspec
import orjson

Raw = msgspec.Raw  # default None: the key is absent
# document keys the reader uses besides traceEvents (device_frame tests for the ROCm ones)
HEADER = ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "roctracer_version",
          "hip_runtime_version", "hip_driver_version")


class Args(msgspec.Struct, gc=False):
    """The ``args`` keys any part of the reader uses (no reference cycles: gc off)."""

    device: Any = None
    stream: Any = None
    correlation: Any = None
    external_id: Any = msgspec.field(default=None, name="External id")
    bytes: Any = None
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    group_size: Any = msgspec.field(default=None, name="Group size")
    collective: Raw = msgspec.field(default=None, name="Collective name")
    dtype: Raw = None
    pg_ranks: Raw = msgspec.field(default=None, name="Process Group Ranks")
    pg_name: Raw = msgspec.field(default=None, name="Process Group Name")
    pg_desc: Raw = msgspec.field(default=None, name="Process Group Description")
    input_dims: Raw = msgspec.field(default=None, name="Input Dims")
    input_type: Raw = msgspec.field(default=None, name="Input type")
    concrete: Raw = msgspec.field(default=None, name="Concrete Inputs")
    grid: Any = None  # kernel launch shape: [x, y, z] lists and integers
    block: Any = None
    regs: Any = msgspec.field(default=None, name="registers per thread")
    shared: Any = msgspec.field(default=None, name="shared memory")


class Event(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: str | None = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Args | None = None


class Doc(msgspec.Struct):
    traceEvents: list[msgspec.Raw] | None = None  # noqa: N815 (the JSON key)
    deviceProperties: Any = msgspec.UNSET  # noqa: N815
    distributedInfo: Any = msgspec.UNSET  # noqa: N815
    baseTimeNanoseconds: Any = msgspec.UNSET  # noqa: N815
    roctracer_version: Any = msgspec.UNSET
    hip_runtime_version: Any = msgspec.UNSET
    hip_driver_version: Any = msgspec.UNSET


EMPTY = Args()
# args column name (as the tolerant path names it) -> Args attribute
ARG_ATTRS = {"device": "device", "stream": "stream", "correlation": "correlation",
             "External id": "external_id", "bytes": "bytes",
             "In msg nelems": "in_nelems", "Out msg nelems": "out_nelems",
             "Group size": "group_size", "Collective name": "collective", "dtype": "dtype",
             "Process Group Ranks": "pg_ranks", "Process Group Name": "pg_name",
             "Process Group Description": "pg_desc",
             "Input Dims": "input_dims", "Input type": "input_type",
             "Concrete Inputs": "concrete", "grid": "grid", "block": "block",
             "registers per thread": "regs", "shared memory": "shared"}
_DECODER = msgspec.json.Decoder(Doc)
_EVENTS = msgspec.json.Decoder(list[Event])
CHUNK = 1 << 15  # events decoded at a time: their Python objects live only that long


def decode(raw: bytes) -> tuple[list[msgspec.Raw] | None, dict[str, Any]]:
    """Each event's raw JSON (None when ``traceEvents`` is missing or null) and the header
    keys that are present. Raises ``msgspec.ValidationError``/``DecodeError`` when the
    document does not fit the schema (the caller then takes the tolerant orjson path)."""
    doc = _DECODER.decode(raw)
    header = {k: getattr(doc, k) for k in HEADER if getattr(doc, k) is not msgspec.UNSET}
    return doc.traceEvents, header


def chunks(raws: list[msgspec.Raw]) -> Iterator[list[Event]]:
    """The events, ``CHUNK`` at a time (at least one list, maybe empty): the whole
    document's events as objects at once would take ~4x the JSON's size. Empties
    ``raws`` as it goes."""
    while True:
        part = b"[" + b",".join(raws[:CHUNK]) + b"]"
        del raws[:CHUNK]
        yield _EVENTS.decode(part)
        if not raws:
            return


def lazy(value: Any) -> Any:
    """A field's value as the tolerant path has it: a raw field decoded by orjson."""
    return orjson.loads(memoryview(value)) if type(value) is msgspec.Raw else value
