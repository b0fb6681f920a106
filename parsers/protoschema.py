"""Protobuf message classes built at runtime from descriptors we write ourselves: the one
builder behind the XSpace schema (:mod:`parsers.xplane_schema`) and the XLA ``HloProto`` schema
(:mod:`parsers.hlo.schema`).

No pip package ships a compiled ``xplane_pb2`` or ``hlo_pb2`` (shared/reference/xprof.md §1)
and generating one needs protoc, so each schema lists the messages and fields it reads and the
protobuf runtime builds the classes from that description. Fields left out are skipped by the
runtime as unknown fields; enums are declared as ``int32`` (the same varint on the wire).
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto
# A field: (name, number, type, label, message type name or None), optionally followed by the
# index of the oneof it belongs to.
Field = tuple


def _add_field(msg: descriptor_pb2.DescriptorProto, spec: Field) -> None:
    name, number, ftype, label, type_name, *rest = spec
    f = msg.field.add(name=name, number=number, type=ftype, label=label)
    if type_name:
        f.type_name = type_name
    if rest and rest[0] is not None:
        f.oneof_index = rest[0]


def file_descriptor(name: str, package: str, messages: dict[str, list[Field]],
                    oneofs: dict[str, list[str]] | None = None,
                    maps: dict[str, dict[str, str]] | None = None,
                    ) -> descriptor_pb2.FileDescriptorProto:
    """A proto3 file of ``messages`` (message name -> fields, in declaration order).
    ``oneofs``: message -> its oneof names (fields name them by index); ``maps``: message ->
    {entry message name: value message type} for its ``map<int64, value>`` fields, declared as
    the nested entry messages the wire format uses (key = 1, value = 2)."""
    fd = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3")
    for msg_name, fields in messages.items():
        msg = fd.message_type.add(name=msg_name)
        for oneof in (oneofs or {}).get(msg_name, []):
            msg.oneof_decl.add(name=oneof)
        for spec in fields:
            _add_field(msg, spec)
        for entry, value_type in (maps or {}).get(msg_name, {}).items():
            nested = msg.nested_type.add(name=entry)
            nested.options.map_entry = True
            _add_field(nested, ("key", 1, F.TYPE_INT64, F.LABEL_OPTIONAL, None))
            _add_field(nested, ("value", 2, F.TYPE_MESSAGE, F.LABEL_OPTIONAL, value_type))
    return fd


def build_pool(fd: descriptor_pb2.FileDescriptorProto) -> descriptor_pool.DescriptorPool:
    """A private pool holding one file (never the default pool: another library's classes of
    the same package would clash with ours)."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return pool


def message_class(pool: descriptor_pool.DescriptorPool, full_name: str) -> type:
    """The runtime class of message ``full_name`` of ``pool`` (the runtime caches it)."""
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
