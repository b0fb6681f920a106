"""Decode a serialized ``xla.HloProto`` (XSpace ``/host:metadata``) into
:mod:`tracelens.core.hlo_model`.

Facts used (shared/reference/hlo.md): operands and called computations are ids
(``(computation_id << 32) | local_id`` since 2025-09, small ints before: only equality is
used); proto3 leaves zero-valued scalars off the wire, so a missing ``tuple_index`` or
``input_batch_dimension`` is 0; ``backend_config`` is JSON bytes, or since 2026-03 a
``backend_config_payload`` (inline, or an index into ``HloModuleProto.payloads``).
"""

from __future__ import annotations

import struct
from typing import Any

from parsers.hlo.attrs import parse_attribute_dict
from parsers.hlo.replica_groups import iota_groups, mesh_axes_groups
from tracelens.core.hlo_model import (Computation, ConvDims, DotDims, Instruction, Module, Shape,
                                 WindowDim, type_name)

_TUPLE = 13  # PrimitiveType TUPLE


def shape_from_proto(sp: Any, seen: dict[tuple[int, tuple[int, ...], int], Shape] | None = None
                     ) -> Shape:
    """``sp`` as a :class:`Shape`; ``seen``: the array shapes made so far (a module's
    instructions repeat a few shapes thousands of times: one immutable Shape serves each)."""
    element_type = sp.element_type
    if element_type == _TUPLE:
        return Shape("tuple", (), tuple(shape_from_proto(s, seen) for s in sp.tuple_shapes))
    key = (element_type, tuple(sp.dimensions),
           sp.layout.element_size_in_bits if sp.HasField("layout") else 0)
    shape = seen.get(key) if seen is not None else None
    if shape is None:
        shape = Shape(type_name(element_type) or f"type{element_type}", key[1], (), key[2])
        if seen is not None:
            seen[key] = shape
    return shape


def _dot_dims(d: Any) -> DotDims:
    return DotDims(tuple(d.lhs_contracting_dimensions), tuple(d.rhs_contracting_dimensions),
                   tuple(d.lhs_batch_dimensions), tuple(d.rhs_batch_dimensions))


def _window(w: Any) -> tuple[WindowDim, ...]:
    # proto3: unset stride/dilations read as 0; XLA treats them as 1.
    return tuple(WindowDim(size=d.size or 1, stride=d.stride or 1, padding_low=d.padding_low,
                           padding_high=d.padding_high, window_dilation=d.window_dilation or 1,
                           base_dilation=d.base_dilation or 1) for d in w.dimensions)


def _conv_dims(c: Any) -> ConvDims:
    return ConvDims(c.input_batch_dimension, c.input_feature_dimension,
                    tuple(c.input_spatial_dimensions), c.kernel_input_feature_dimension,
                    c.kernel_output_feature_dimension, tuple(c.kernel_spatial_dimensions),
                    c.output_batch_dimension, c.output_feature_dimension,
                    tuple(c.output_spatial_dimensions))


def replica_groups_from_proto(ins: Any) -> list[list[int]] | None:
    """Explicit groups from whichever encoding the instruction uses (49 → 92 → 93 → 87)."""
    if len(ins.replica_groups):
        return [list(g.replica_ids) for g in ins.replica_groups]
    if ins.HasField("iota_collective_device_list"):
        io = ins.iota_collective_device_list
        return iota_groups(io.num_replica_groups, io.num_devices_per_group,
                           list(io.iota_reshape_dims), list(io.iota_transpose_perm))
    if ins.HasField("mesh_axes_replica_group_list"):
        ml = ins.mesh_axes_replica_group_list
        mesh = ml.mesh
        refs = [(a.mesh_axis_index,
                 a.sub_axis_info.pre_size if a.HasField("sub_axis_info") else None,
                 a.sub_axis_info.size if a.HasField("sub_axis_info") else None)
                for a in ml.axes]
        it = mesh.iota_transform if mesh.HasField("iota_transform") else None
        return mesh_axes_groups([a.size for a in mesh.axes], refs, list(mesh.device_ids),
                                list(it.reshape_dims) if it else (),
                                list(it.transpose_perm) if it else ())
    if ins.HasField("collective_device_list"):
        cl = ins.collective_device_list
        if cl.HasField("iota_replica_group_list"):
            io = cl.iota_replica_group_list
            return iota_groups(io.num_replica_groups, io.num_devices_per_group,
                               list(io.iota_reshape_dims), list(io.iota_transpose_perm))
        return [list(g.replica_ids) for g in cl.replica_groups]
    return None


# Scalar literal value fields (xla_data.proto LiteralProto): repeated numbers, or little-endian
# bytes read with a struct format.
_LITERAL_REPEATED = {"pred": "preds", "s32": "s32s", "s64": "s64s", "u32": "u32s",
                     "u64": "u64s", "f32": "f32s", "f64": "f64s"}
_LITERAL_BYTES = {"s8": ("s8s", "<b"), "u8": ("u8s", "<B"), "s16": ("s16s", "<h"),
                  "u16": ("u16s", "<H"), "f16": ("f16s", "<e"), "bf16": ("bf16s", "<H")}


def scalar_literal(ins: Any, shape: Shape) -> int | float | bool | None:
    """The value of a scalar constant from its ``literal`` (field 8); None for arrays, types
    without a decoder here, or a literal whose value count is not one."""
    if ins.opcode != "constant" or shape.is_tuple or shape.dims or not ins.HasField("literal"):
        return None
    lit = ins.literal
    if shape.dtype in _LITERAL_REPEATED:
        values = getattr(lit, _LITERAL_REPEATED[shape.dtype])
        if len(values) != 1:
            return None
        v = values[0]
        return bool(v) if shape.dtype == "pred" else (int(v) if shape.dtype[0] in "su"
                                                      else float(v))
    if shape.dtype in _LITERAL_BYTES:
        field, fmt = _LITERAL_BYTES[shape.dtype]
        raw = getattr(lit, field)
        if len(raw) != struct.calcsize(fmt):
            return None
        (v,) = struct.unpack(fmt, raw)
        if shape.dtype == "bf16":  # the high half of an f32
            return struct.unpack("<f", struct.pack("<I", v << 16))[0]
        return v
    return None


def _backend_config(ins: Any, payloads: list[bytes]) -> str:
    raw = ins.backend_config
    if not raw and ins.HasField("backend_config_payload"):
        pl = ins.backend_config_payload
        raw = pl.value or (payloads[pl.id] if 0 <= pl.id < len(payloads) else b"")
    return raw.decode("utf-8", errors="replace") if raw else ""


def module_from_proto(data: bytes, program_id: int | None = None) -> Module:
    """Decode one serialized HloProto. ``program_id`` defaults to ``HloModuleProto.id``."""
    from parsers.hlo.schema import hlo_proto_class  # protobuf: only when a proto is read

    proto = hlo_proto_class()()
    proto.ParseFromString(data)
    hm = proto.hlo_module
    payloads = list(hm.payloads)
    comp_names = {c.id: c.name for c in hm.computations}
    module = Module(name=hm.name, program_id=program_id if program_id is not None else hm.id,
                    entry=hm.entry_computation_name or comp_names.get(hm.entry_computation_id,
                                                                      ""))
    if hm.HasField("device_assignment"):
        module.replica_count = hm.device_assignment.replica_count or None
        module.partition_count = hm.device_assignment.computation_count or None
    shapes: dict[tuple[int, tuple[int, ...], int], Shape] = {}
    for c in hm.computations:
        names = {i.id: i.name for i in c.instructions}
        comp = Computation(name=c.name, root=names.get(c.root_id, ""),
                           is_fusion=c.is_fusion_computation)
        for i in c.instructions:
            inst = _instruction(i, names, comp_names, payloads, shapes)
            comp.instructions[inst.name] = inst
        module.computations[comp.name] = comp
    if not hm.computations:  # an empty or damaged proto: no program to read, not an empty one
        raise ValueError("the HloProto holds no computation")
    if module.entry not in module.computations:
        module.entry = hm.computations[-1].name  # the entry comes last (hlo.md §2.2)
    return module


# the four encodings replica_groups_from_proto reads: without any of them, no groups (None)
_GROUP_FIELDS = frozenset({"replica_groups", "iota_collective_device_list",
                           "mesh_axes_replica_group_list", "collective_device_list"})


def _instruction(i: Any, names: dict[int, str], comp_names: dict[int, str],
                 payloads: list[bytes], shapes: dict[tuple[int, tuple[int, ...], int], Shape]
                 ) -> Instruction:
    """One ``HloInstructionProto`` as an :class:`Instruction`. Its set fields are listed once
    (``ListFields``: an instruction sets 4-8 of ~80) and only those are read; an unset field
    keeps the dataclass default, which is proto3's zero value or what XLA reads for it."""
    f = {fd.name: v for fd, v in i.ListFields()}
    get = f.get
    shape = shape_from_proto(i.shape, shapes)
    opcode = get("opcode", "")
    kw: dict[str, Any] = {}
    if "operand_ids" in f:
        kw["operands"] = tuple(names[o] for o in f["operand_ids"] if o in names)
    if "called_computation_ids" in f:
        kw["called"] = tuple(comp_names[k] for k in f["called_computation_ids"]
                             if k in comp_names)
    if "dimensions" in f:
        kw["dimensions"] = tuple(f["dimensions"])
    if "dot_dimension_numbers" in f:
        kw["dot"] = _dot_dims(f["dot_dimension_numbers"])
    if "ragged_dot_dimension_numbers" in f:
        ragged = f["ragged_dot_dimension_numbers"]
        if "dot" not in kw:
            kw["dot"] = _dot_dims(ragged.dot_dimension_numbers)
        kw["lhs_ragged_dims"] = tuple(ragged.lhs_ragged_dimensions)
    if "window" in f:
        kw["window"] = _window(f["window"])
    if "convolution_dimension_numbers" in f:
        kw["conv"] = _conv_dims(f["convolution_dimension_numbers"])
    config = _backend_config(i, payloads) if "backend_config" in f \
        or "backend_config_payload" in f else ""
    if _GROUP_FIELDS.intersection(f):
        kw["replica_groups"] = replica_groups_from_proto(i)
    if "source_target_pairs" in f:
        kw["source_target_pairs"] = tuple((p.source, p.target)
                                          for p in f["source_target_pairs"])
    if "precision_config" in f:
        kw["precision_algorithm"] = f["precision_config"].algorithm
    if "metadata" in f:
        kw["op_name"] = f["metadata"].op_name
    if "literal" in f:
        kw["literal"] = scalar_literal(i, shape)
    return Instruction(
        name=get("name", ""), opcode=opcode, shape=shape,
        feature_group_count=get("feature_group_count", 0) or 1,
        batch_group_count=get("batch_group_count", 0) or 1,
        custom_call_target=get("custom_call_target", ""),
        backend_config_text=config,
        ffi_attributes=parse_attribute_dict(config) if opcode == "custom-call" else None,
        fusion_kind=get("fusion_kind", ""),
        channel_id=get("channel_id", 0) or get("all_reduce_id", 0),
        use_global_device_ids=get("use_global_device_ids", False),
        tuple_index=get("tuple_index", 0),
        parameter_number=get("parameter_number", 0),
        comparison_direction=get("comparison_direction", ""),
        comparison_type=get("comparison_type", ""),
        **kw)
