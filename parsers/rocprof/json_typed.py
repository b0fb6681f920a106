"""The fast, low-memory decode of rocprofv3 JSON: msgspec with a schema of only the fields
tracelens reads.

``orjson.loads`` turns a 475 MB file with 1M dispatches into ~4 GB of Python dicts; decoded
into typed ``msgspec.Struct`` objects that hold only the ~10 fields read (every other key is
skipped without being materialized), the same file needs a fraction of that. The schema is
strict: any value of another type than the schema says (a string timestamp, a float id, an
object where a number belongs) makes :func:`decode` return None, and the reader falls back to
the tolerant orjson path, which counts each such value by field. So both paths give the same
result for every file the typed path accepts.
"""

from __future__ import annotations

from typing import Any

import msgspec

TOP_KEY = "rocprofiler-sdk-tool"
Int = int | None


class Handle(msgspec.Struct):
    handle: Int = None


class Corr(msgspec.Struct):
    internal: Int = None
    ancestor: Int = None


class Dim(msgspec.Struct):
    x: Int = None
    y: Int = None
    z: Int = None


class Info(msgspec.Struct):
    agent_id: Handle | None = None
    queue_id: Handle | None = None
    kernel_id: Int = None
    dispatch_id: Int = None
    group_segment_size: Int = None
    workgroup_size: Dim | None = None
    grid_size: Dim | None = None


class Dispatch(msgspec.Struct):
    thread_id: Int = None
    correlation_id: Corr | None = None
    start_timestamp: Int = None
    end_timestamp: Int = None
    stream_id: Handle | None = None
    dispatch_info: Info | None = None


class Api(msgspec.Struct):
    kind: Int = None
    operation: Int = None
    thread_id: Int = None
    correlation_id: Corr | None = None
    start_timestamp: Int = None
    end_timestamp: Int = None


class Copy(Api):
    src_agent_id: Handle | None = None
    dst_agent_id: Handle | None = None
    bytes: Int = None
    stream_id: Handle | None = None


class Symbol(msgspec.Struct):
    kernel_id: Int = None
    formatted_kernel_name: str | None = None
    kernel_name: str | None = None
    arch_vgpr_count: Int = None


class Proc(msgspec.Struct):
    metadata: Any = None
    agents: Any = None
    strings: Any = None
    counters: Any = None
    callback_records: Any = None
    kernel_symbols: list[Symbol] | None = None
    buffer_records: dict[str, msgspec.Raw] | None = None


class Doc(msgspec.Struct):
    procs: list[Proc] | None = msgspec.field(default=None, name=TOP_KEY)


_DOC = msgspec.json.Decoder(Doc)
_LISTS = {"kernel_dispatch": msgspec.json.Decoder(list[Dispatch]),
          "memory_copy": msgspec.json.Decoder(list[Copy])}
_API = msgspec.json.Decoder(list[Api])


def decode(raw: bytes) -> list[dict[str, Any]] | None:
    """Each process as a dict (small parts as plain JSON values, record lists as Structs),
    or None when the document does not fit the schema (the caller then parses it with
    orjson, which reports or counts what is wrong)."""
    try:
        doc = _DOC.decode(raw)
        if not doc.procs:
            return None
        out = []
        for p in doc.procs:
            buf = {}
            for key, value in (p.buffer_records or {}).items():
                dec = _LISTS.get(key) or (_API if key.endswith("_api") else None)
                if dec is not None:
                    buf[key] = dec.decode(value) or []
            out.append({"metadata": p.metadata, "agents": p.agents, "strings": p.strings,
                        "counters": p.counters, "callback_records": p.callback_records,
                        "kernel_symbols": p.kernel_symbols or [], "buffer_records": buf})
        return out
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
