"""XSpace message classes built at runtime from a descriptor we define ourselves.

No pip package ships a compiled ``xplane_pb2`` (see shared/reference/xprof.md §1), and
generating one needs protoc. The schema is tiny (7 messages of
``tsl/profiler/protobuf/xplane.proto``, package ``tensorflow.profiler``), so we describe it
and :mod:`parsers.protoschema` builds the classes.
"""

from __future__ import annotations

from functools import lru_cache

from google.protobuf import descriptor_pb2

from parsers.protoschema import F as _F
from parsers.protoschema import build_pool, file_descriptor, message_class

_PKG = "tensorflow.profiler"

# (name, number, type, label, type_name or None, oneof index or None)
_MESSAGES: dict[str, list[tuple]] = {
    "XSpace": [
        ("planes", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".tensorflow.profiler.XPlane", None),
        ("errors", 2, _F.TYPE_STRING, _F.LABEL_REPEATED, None, None),
        ("warnings", 3, _F.TYPE_STRING, _F.LABEL_REPEATED, None, None),
        ("hostnames", 4, _F.TYPE_STRING, _F.LABEL_REPEATED, None, None),
    ],
    "XPlane": [
        ("id", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
        ("lines", 3, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".tensorflow.profiler.XLine", None),
        ("event_metadata", 4, _F.TYPE_MESSAGE, _F.LABEL_REPEATED,
         ".tensorflow.profiler.XPlane.EventMetadataEntry", None),
        ("stat_metadata", 5, _F.TYPE_MESSAGE, _F.LABEL_REPEATED,
         ".tensorflow.profiler.XPlane.StatMetadataEntry", None),
        ("stats", 6, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".tensorflow.profiler.XStat", None),
    ],
    "XLine": [
        ("id", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("display_id", 10, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
        ("display_name", 11, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
        ("timestamp_ns", 3, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("duration_ps", 9, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("events", 4, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".tensorflow.profiler.XEvent", None),
    ],
    "XEvent": [
        ("metadata_id", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("offset_ps", 2, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, 0),
        ("num_occurrences", 5, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, 0),
        ("duration_ps", 3, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("stats", 4, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".tensorflow.profiler.XStat", None),
    ],
    "XStat": [
        ("metadata_id", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("double_value", 2, _F.TYPE_DOUBLE, _F.LABEL_OPTIONAL, None, 0),
        ("uint64_value", 3, _F.TYPE_UINT64, _F.LABEL_OPTIONAL, None, 0),
        ("int64_value", 4, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, 0),
        ("str_value", 5, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, 0),
        ("bytes_value", 6, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, None, 0),
        ("ref_value", 7, _F.TYPE_UINT64, _F.LABEL_OPTIONAL, None, 0),
    ],
    "XEventMetadata": [
        ("id", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
        ("display_name", 4, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
        ("metadata", 3, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, None, None),
        ("stats", 5, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".tensorflow.profiler.XStat", None),
        ("child_id", 6, _F.TYPE_INT64, _F.LABEL_REPEATED, None, None),
    ],
    "XStatMetadata": [
        ("id", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None),
        ("name", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
        ("description", 3, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None, None),
    ],
}
_ONEOFS = {"XEvent": ["data"], "XStat": ["value"]}
_MAPS = {"EventMetadataEntry": ".tensorflow.profiler.XEventMetadata",
         "StatMetadataEntry": ".tensorflow.profiler.XStatMetadata"}


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    return file_descriptor("tracelens/xplane.proto", _PKG, _MESSAGES, oneofs=_ONEOFS,
                           maps={"XPlane": _MAPS})


@lru_cache(maxsize=1)
def xspace_class() -> type:
    """The ``XSpace`` message class (built once per process, in a private pool)."""
    return message_class(build_pool(_file_descriptor()), f"{_PKG}.XSpace")


# XProf's ``memory_access_breakdown`` stat of a TPU op: a serialized MemoryAccessBreakdown
# (``xprof/protobuf/op_metrics.proto``): one entry per (read or write, memory space) with its
# bytes. Memory spaces as XProf's roofline reads them: 1 HBM, 2 CMEM, 3 VMEM.
_BREAKDOWN: dict[str, list[tuple]] = {
    "MemoryAccessBreakdown": [
        ("memory_accessed", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED,
         ".tensorflow.profiler.MemoryAccessed", None)],
    "MemoryAccessed": [
        ("operation_type", 1, _F.TYPE_INT32, _F.LABEL_OPTIONAL, None, None),
        ("memory_space", 2, _F.TYPE_UINT64, _F.LABEL_OPTIONAL, None, None),
        ("bytes_accessed", 3, _F.TYPE_UINT64, _F.LABEL_OPTIONAL, None, None)],
}
MEMORY_SPACE_HBM = 1


@lru_cache(maxsize=1)
def memory_breakdown_class() -> type:
    """The ``MemoryAccessBreakdown`` message class (its own private pool)."""
    fd = file_descriptor("tracelens/memory_breakdown.proto", _PKG, _BREAKDOWN)
    return message_class(build_pool(fd), f"{_PKG}.MemoryAccessBreakdown")
