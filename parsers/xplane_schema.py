"""XSpace message classes built at runtime from a descriptor we define ourselves.

No pip package ships a compiled ``xplane_pb2`` (see shared/reference/xprof.md §1), and
generating one needs protoc. The schema is tiny (7 messages of
``tsl/profiler/protobuf/xplane.proto``, package ``tensorflow.profiler``), so we describe it
with ``descriptor_pb2`` and let the protobuf runtime build the classes.
"""

from __future__ import annotations

from functools import lru_cache

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_PKG = "tensorflow.profiler"
_F = descriptor_pb2.FieldDescriptorProto

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


def _add_field(msg: descriptor_pb2.DescriptorProto, spec: tuple) -> None:
    name, number, ftype, label, type_name, oneof = spec
    f = msg.field.add(name=name, number=number, type=ftype, label=label)
    if type_name:
        f.type_name = type_name
    if oneof is not None:
        f.oneof_index = oneof


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(
        name="tracelens/xplane.proto", package=_PKG, syntax="proto3")
    for msg_name, fields in _MESSAGES.items():
        msg = fd.message_type.add(name=msg_name)
        for oneof in _ONEOFS.get(msg_name, []):
            msg.oneof_decl.add(name=oneof)
        for spec in fields:
            _add_field(msg, spec)
        if msg_name == "XPlane":
            for entry, value_type in _MAPS.items():
                nested = msg.nested_type.add(name=entry)
                nested.options.map_entry = True
                _add_field(nested, ("key", 1, _F.TYPE_INT64, _F.LABEL_OPTIONAL, None, None))
                _add_field(nested, ("value", 2, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL,
                                    value_type, None))
    return fd


@lru_cache(maxsize=1)
def xspace_class() -> type:
    """The ``XSpace`` message class (built once per process, in a private pool)."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PKG}.XSpace"))
