"""The fast, low-memory decode of Kineto JSON: msgspec with a schema of only the fields read.

``orjson.loads`` builds a dict per event with every key, and most events are never used
(``python_function`` is 88% of the xDiT trace's 229k events). Decoded into ``msgspec.Struct``
objects that declare only the fields :mod:`parsers.kineto.reader` reads, every other key is
skipped inside msgspec's C code, without Python objects.

What an event costs is the Python objects it becomes (creating and freeing them is most of
the reader's time on a large trace), so the bulk decode makes as few as it can:

- events are a union tagged by ``ph``: a complete event (``X``) is a :class:`Complete` with
  the fields read; an event of any other phase (flows, instants, metadata: a third of a
  training trace) is only its ``cat``, which the loss counts need. A ``ph`` that is missing,
  not a string or not a Chrome-trace phase fails the schema: the tolerant path takes it;
- :class:`Args` holds only the args read on many rows (ids, device, stream, bytes, launch
  shape). The rare ones (collective arguments of ``record_param_comms``, the recorded shapes
  of costed ops) would double its size on every event: :func:`rare` decodes them again, from
  each event's raw JSON, for the few rows that use them.

Both paths must give the same frames, so the schema keeps the values exactly as orjson
would give them: scalar fields are ``Any`` (the same Python value; the column builder
converts it as before). Two kinds of value would differ: integers beyond 64 bits (orjson
rounds them to a float, msgspec keeps them exact) and non-string names (a string column
would spell them differently). So ``name`` must be a string, and the values read for a few
rows only (collective name and dtype, shapes) stay raw JSON bytes that orjson decodes for
those rows (:func:`lazy`). Anything else unexpected (an event that is not an object, ``args``
that is not an object) makes :func:`decode` or the chunk decode fail and the reader takes
the tolerant orjson path, which skips or counts it.
"""

from __future__ import annotations

from typing import Any, Iterator, Literal, Sequence, Union

import msgspec
import orjson

Raw = msgspec.Raw  # default None: the key is absent
# document keys the reader uses besides traceEvents (device_frame tests for the ROCm ones)
HEADER = ("deviceProperties", "distributedInfo", "baseTimeNanoseconds", "roctracer_version",
          "hip_runtime_version", "hip_driver_version")


class Args(msgspec.Struct, gc=False, frozen=True):
    """The ``args`` keys read on many rows, in the order Kineto writes them (no reference
    cycles: gc off; frozen, so that one empty instance can be the default)."""

    external_id: Any = msgspec.field(default=None, name="External id")
    device: Any = None
    stream: Any = None
    correlation: Any = None
    # the kernel launch shape ([x, y, z] lists and integers; not raw JSON: a Raw would keep
    # its chunk's whole text alive as long as the event, and typed.chunks pins some events)
    regs: Any = msgspec.field(default=None, name="registers per thread")
    shared: Any = msgspec.field(default=None, name="shared memory")
    grid: Any = None
    block: Any = None
    bytes: Any = None


class RareArgs(msgspec.Struct, gc=False, frozen=True):
    """The ``args`` keys read on a few rows only: ``record_param_comms`` and costed ops."""

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


EMPTY = Args()
EMPTY_RARE = RareArgs()


class Complete(msgspec.Struct, gc=False, tag_field="ph", tag="X"):
    """A complete event (``ph: X``), the only phase whose events are used."""

    cat: Any = None
    name: str | None = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Args | None = EMPTY  # None only for a written ``"args": null``


class _Rare(msgspec.Struct, gc=False):
    args: RareArgs | None = None


# the Trace Event Format's phases (Chrome's catapult docs; S/T/p/F are the deprecated async
# ones): an event of any other is not a trace event this schema can place
PHASES = ("B", "E", "X", "i", "I", "C", "b", "n", "e", "S", "T", "p", "F", "s", "t", "f",
          "P", "N", "O", "D", "M", "V", "v", "R", "c", "(", ")")
# the other phases: the category only (what the loss counts read), one struct per tag
_OTHER = tuple(msgspec.defstruct(f"Phase{i}", [("cat", Any, None)], gc=False,
                                 tag_field="ph", tag=p)
               for i, p in enumerate(PHASES) if p != "X")
Event = Union[(Complete, *_OTHER)]  # type: ignore[valid-type]
# The categories Kineto writes on events of the other phases (flows, instants, counters),
# none of them used. Decoded with the other phases' category checked against these (or
# absent), such an event counts for nothing: it reads as an event of the unused category
# OTHER_CAT (a class attribute: no field, no object per event), and the selection needs no
# pass over the events' classes. A chunk with any other category on such an event (a used
# one, which is counted) is decoded again with the general union (see chunks).
OTHER_CATS = ("ac2g", "fwdbwd", "cpu_instant_event", "async_cpu_to_gpu", "python_function",
              "Trace", "overhead", "cuda_sync")
OTHER_CAT = OTHER_CATS[0]
_QUIET = tuple(msgspec.defstruct(f"QuietPhase{i}", [("other", Literal[OTHER_CATS] | None,
                                                      msgspec.field(default=None, name="cat"))],
                                 gc=False, tag_field="ph", tag=p, namespace={"cat": OTHER_CAT})
               for i, p in enumerate(PHASES) if p != "X")
QuietEvent = Union[(Complete, *_QUIET)]  # type: ignore[valid-type]
PHASE_OF: dict[type, str] = {Complete: "X",
                             **{t: t.__struct_config__.tag for t in _OTHER + _QUIET}}


class Doc(msgspec.Struct):
    traceEvents: list[msgspec.Raw] | None = None  # noqa: N815 (the JSON key)
    deviceProperties: Any = msgspec.UNSET  # noqa: N815
    distributedInfo: Any = msgspec.UNSET  # noqa: N815
    baseTimeNanoseconds: Any = msgspec.UNSET  # noqa: N815
    roctracer_version: Any = msgspec.UNSET
    hip_runtime_version: Any = msgspec.UNSET
    hip_driver_version: Any = msgspec.UNSET


# args column name (as the tolerant path names it) -> Args attribute
ARG_ATTRS = {"device": "device", "stream": "stream", "correlation": "correlation",
             "External id": "external_id", "bytes": "bytes", "grid": "grid", "block": "block",
             "registers per thread": "regs", "shared memory": "shared"}
# args column name -> RareArgs attribute
RARE_ATTRS = {"In msg nelems": "in_nelems", "Out msg nelems": "out_nelems",
              "Group size": "group_size", "Collective name": "collective", "dtype": "dtype",
              "Process Group Ranks": "pg_ranks", "Process Group Name": "pg_name",
              "Process Group Description": "pg_desc", "Input Dims": "input_dims",
              "Input type": "input_type", "Concrete Inputs": "concrete"}
_DECODER = msgspec.json.Decoder(Doc)
_EVENTS = msgspec.json.Decoder(list[Event])  # type: ignore[valid-type]
_QUIET_EVENTS = msgspec.json.Decoder(list[QuietEvent])  # type: ignore[valid-type]
_RARE = msgspec.json.Decoder(list[_Rare])
CHUNK = 1 << 15  # events decoded at a time: their Python objects live only that long
PIN = 64  # one event in PIN of each chunk lives on until the last chunk (see chunks)
# the decoded events, their raw JSON, and whether the other phases' events read as OTHER_CAT
Chunk = tuple[list[Any], list[msgspec.Raw], bool]


def decode(raw: bytes) -> tuple[list[msgspec.Raw] | None, dict[str, Any]]:
    """Each event's raw JSON (None when ``traceEvents`` is missing or null) and the header
    keys that are present. Raises ``msgspec.ValidationError``/``DecodeError`` when the
    document does not fit the schema (the caller then takes the tolerant orjson path)."""
    doc = _DECODER.decode(raw)
    header = {k: getattr(doc, k) for k in HEADER if getattr(doc, k) is not msgspec.UNSET}
    return doc.traceEvents, header


def chunks(raws: list[msgspec.Raw]) -> Iterator[Chunk]:
    """The events, ``CHUNK`` at a time (at least one chunk, maybe empty), each with its
    events' raw JSON (for :func:`rare`): the whole document's events as objects at once
    would take ~4x the JSON's size. Empties ``raws`` as it goes.

    Two things keep the memory a chunk used from being returned to the system and faulted
    in again by the next one (page faults were a third of the decode's CPU time): each
    chunk's JSON is joined in one copy, not three; and one event in :data:`PIN` of every
    chunk stays alive until the last chunk is done, so that the allocator's arenas never
    empty and the next chunk's objects reuse them (a chunk's objects otherwise all die
    together and their arenas are unmapped)."""
    pins, quiet = [], True
    while True:
        part = raws[:CHUNK]
        del raws[:CHUNK]
        pieces = part.copy()  # part stays as it is, for rare()
        if pieces:
            pieces[0] = b"[" + pieces[0]
            pieces[-1] = bytes(pieces[-1]) + b"]"
        text = b",".join(pieces) if pieces else b"[]"
        del pieces
        try:
            events = (_QUIET_EVENTS if quiet else _EVENTS).decode(text)
        except msgspec.ValidationError:
            if not quiet:
                raise
            quiet = False  # a category QuietEvent does not take: the general union from here
            events = _EVENTS.decode(text)
        del text
        pins.append(events[::PIN])
        yield events, part, quiet
        if not raws:
            return


def rare(raws: Sequence[msgspec.Raw], keys: Sequence[str]) -> list[list[Any]]:
    """The rare args ``keys`` (:data:`RARE_ATTRS`) of the events whose raw JSON is ``raws``
    (events that already fit the bulk schema), one list per key, as the tolerant path has
    them: one decode for all of them."""
    if not raws:
        return [[] for _ in keys]
    args = [EMPTY_RARE if e.args is None else e.args
            for e in _RARE.decode(b"[" + b",".join(raws) + b"]")]
    return [[lazy(getattr(a, RARE_ATTRS[k])) for a in args] for k in keys]


def lazy(value: Any) -> Any:
    """A field's value as the tolerant path has it: a raw field decoded by orjson."""
    return orjson.loads(memoryview(value)) if type(value) is msgspec.Raw else value
