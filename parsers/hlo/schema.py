"""``xla.HloProto`` message classes built at runtime from a descriptor we define ourselves.

Like ``parsers/xplane_schema.py``: no pip package ships ``hlo_pb2`` and generating one needs
protoc, so the subset of ``xla/service/hlo.proto`` and ``xla/xla_data.proto`` the cost model
reads is described here and built by :mod:`parsers.protoschema` (package ``xla``, proto3).
Field numbers are the verified ones of shared/reference/hlo.md §2 (openxla/xla main at
``183fa00c``); those of ``LiteralProto`` (scalar constants, for loop trip counts) were read
from ``xla_data.proto`` on openxla/xla main. Fields we leave out (shardings, buffer
assignment, sub-byte and f8 literal values, ...) are skipped by the protobuf runtime as unknown
fields. Enums are declared as ``int32`` (same varint wire form); :mod:`tracelens.core.hlo_model`
names their values.

Replica groups: all four encodings are carried (49, 87 incl. its pre-2026 nested iota at 87.2,
92, 93); a decoder built from an older schema silently drops 93 (hlo.md §9 pitfall 1).
"""

from __future__ import annotations

from functools import lru_cache

from google.protobuf import descriptor_pb2, descriptor_pool

from parsers import protoschema
from parsers.protoschema import F as _F

_PKG = "xla"
_R, _O = _F.LABEL_REPEATED, _F.LABEL_OPTIONAL
I64, I32, STR, BYTES, BOOL, MSG = (_F.TYPE_INT64, _F.TYPE_INT32, _F.TYPE_STRING, _F.TYPE_BYTES,
                                   _F.TYPE_BOOL, _F.TYPE_MESSAGE)
U32, U64, FLOAT, DOUBLE = _F.TYPE_UINT32, _F.TYPE_UINT64, _F.TYPE_FLOAT, _F.TYPE_DOUBLE


def _m(name: str) -> str:
    return f".{_PKG}.{name}"


# message -> [(field name, number, type, label, message type or None)]
_MESSAGES: dict[str, list[tuple]] = {
    "HloProto": [
        ("hlo_module", 1, MSG, _O, _m("HloModuleProto")),
    ],
    "HloModuleProto": [
        ("name", 1, STR, _O, None),
        ("entry_computation_name", 2, STR, _O, None),
        ("entry_computation_id", 6, I64, _O, None),
        ("computations", 3, MSG, _R, _m("HloComputationProto")),
        ("id", 5, I64, _O, None),
        ("device_assignment", 15, MSG, _O, _m("DeviceAssignmentProto")),
        ("payloads", 22, BYTES, _R, None),
        ("schedule", 7, MSG, _O, _m("HloScheduleProto")),
    ],
    # ``map<int64, InstructionSequence> sequences = 1``: on the wire a repeated entry message
    # (key = 1, value = 2); keys are computation ids, values instruction ids in run order.
    "HloScheduleProto": [
        ("sequences", 1, MSG, _R, _m("HloScheduleSequence")),
    ],
    "HloScheduleSequence": [
        ("key", 1, I64, _O, None),
        ("value", 2, MSG, _O, _m("InstructionSequence")),
    ],
    "InstructionSequence": [
        ("instruction_ids", 1, I64, _R, None),
    ],
    "HloComputationProto": [
        ("name", 1, STR, _O, None),
        ("instructions", 2, MSG, _R, _m("HloInstructionProto")),
        ("id", 5, I64, _O, None),
        ("root_id", 6, I64, _O, None),
        ("is_fusion_computation", 7, BOOL, _O, None),
        ("execution_thread", 8, STR, _O, None),
    ],
    "HloInstructionProto": [
        ("name", 1, STR, _O, None),
        ("opcode", 2, STR, _O, None),
        ("shape", 3, MSG, _O, _m("ShapeProto")),
        ("metadata", 7, MSG, _O, _m("OpMetadata")),
        ("literal", 8, MSG, _O, _m("LiteralProto")),
        ("parameter_number", 9, I64, _O, None),
        ("fusion_kind", 11, STR, _O, None),
        ("tuple_index", 13, I64, _O, None),
        ("dimensions", 14, I64, _R, None),
        ("window", 15, MSG, _O, _m("Window")),
        ("convolution_dimension_numbers", 16, MSG, _O, _m("ConvolutionDimensionNumbers")),
        ("slice_dimensions", 17, MSG, _R, _m("SliceDimensions")),
        ("dynamic_slice_sizes", 20, I64, _R, None),
        ("channel_id", 26, I64, _O, None),
        ("custom_call_target", 28, STR, _O, None),
        ("comparison_direction", 63, STR, _O, None),
        ("comparison_type", 72, STR, _O, None),
        ("dot_dimension_numbers", 30, MSG, _O, _m("DotDimensionNumbers")),
        ("id", 35, I64, _O, None),
        ("operand_ids", 36, I64, _R, None),
        ("control_predecessor_ids", 37, I64, _R, None),
        ("called_computation_ids", 38, I64, _R, None),
        ("backend_config", 43, BYTES, _O, None),
        ("all_reduce_id", 45, I64, _O, None),
        ("is_host_transfer", 47, BOOL, _O, None),
        ("replica_groups", 49, MSG, _R, _m("ReplicaGroup")),
        ("feature_group_count", 50, I64, _O, None),
        ("precision_config", 51, MSG, _O, _m("PrecisionConfig")),
        ("source_target_pairs", 52, MSG, _R, _m("SourceTarget")),
        ("batch_group_count", 58, I64, _O, None),
        ("use_global_device_ids", 71, BOOL, _O, None),
        ("custom_call_api_version", 77, I32, _O, None),
        ("async_execution_thread", 79, STR, _O, None),
        ("collective_device_list", 87, MSG, _O, _m("CollectiveDeviceListProto")),
        ("ragged_dot_dimension_numbers", 90, MSG, _O, _m("RaggedDotDimensionNumbers")),
        ("iota_collective_device_list", 92, MSG, _O, _m("IotaReplicaGroupListProto")),
        ("mesh_axes_replica_group_list", 93, MSG, _O, _m("MeshAxesReplicaGroupListProto")),
        ("conv_kind", 97, I32, _O, None),
        ("backend_config_payload", 99, MSG, _O, _m("Payload")),
    ],
    # xla_data.proto LiteralProto (openxla/xla main): the typed value fields a scalar constant
    # uses; 16-bit and 8-bit values are little-endian bytes. Sub-byte and f8 fields are left
    # out (skipped as unknown fields).
    "LiteralProto": [
        ("shape", 1, MSG, _O, _m("ShapeProto")),
        ("preds", 2, BOOL, _R, None),
        ("u8s", 3, BYTES, _O, None),
        ("s32s", 4, I32, _R, None),
        ("s64s", 5, I64, _R, None),
        ("u32s", 6, U32, _R, None),
        ("u64s", 7, U64, _R, None),
        ("f32s", 8, FLOAT, _R, None),
        ("f64s", 9, DOUBLE, _R, None),
        ("f16s", 11, BYTES, _O, None),
        ("bf16s", 13, BYTES, _O, None),
        ("s8s", 15, BYTES, _O, None),
        ("u16s", 16, BYTES, _O, None),
        ("s16s", 17, BYTES, _O, None),
    ],
    "Payload": [
        ("value", 1, BYTES, _O, None),
        ("id", 2, I64, _O, None),
    ],
    "ShapeProto": [
        ("element_type", 2, I32, _O, None),
        ("dimensions", 3, I64, _R, None),
        ("tuple_shapes", 4, MSG, _R, _m("ShapeProto")),
        ("layout", 5, MSG, _O, _m("LayoutProto")),
        ("is_dynamic_dimension", 6, BOOL, _R, None),
    ],
    "LayoutProto": [
        ("minor_to_major", 1, I64, _R, None),
        ("element_size_in_bits", 7, I64, _O, None),
        ("memory_space", 8, I64, _O, None),
    ],
    "OpMetadata": [
        ("op_type", 1, STR, _O, None),
        ("op_name", 2, STR, _O, None),
        ("source_file", 3, STR, _O, None),
        ("source_line", 4, I32, _O, None),
        ("deduplicated_name", 12, STR, _O, None),
        ("stack_frame_id", 15, I32, _O, None),
    ],
    "DotDimensionNumbers": [
        ("lhs_contracting_dimensions", 1, I64, _R, None),
        ("rhs_contracting_dimensions", 2, I64, _R, None),
        ("lhs_batch_dimensions", 3, I64, _R, None),
        ("rhs_batch_dimensions", 4, I64, _R, None),
    ],
    "RaggedDotDimensionNumbers": [
        ("dot_dimension_numbers", 1, MSG, _O, _m("DotDimensionNumbers")),
        ("lhs_ragged_dimensions", 2, I64, _R, None),
        ("rhs_group_dimensions", 3, I64, _R, None),
    ],
    "ConvolutionDimensionNumbers": [
        ("input_batch_dimension", 7, I64, _O, None),
        ("input_feature_dimension", 8, I64, _O, None),
        ("input_spatial_dimensions", 11, I64, _R, None),
        ("kernel_input_feature_dimension", 3, I64, _O, None),
        ("kernel_output_feature_dimension", 4, I64, _O, None),
        ("kernel_spatial_dimensions", 6, I64, _R, None),
        ("output_batch_dimension", 9, I64, _O, None),
        ("output_feature_dimension", 10, I64, _O, None),
        ("output_spatial_dimensions", 12, I64, _R, None),
    ],
    "Window": [
        ("dimensions", 1, MSG, _R, _m("WindowDimension")),
    ],
    "WindowDimension": [
        ("size", 1, I64, _O, None),
        ("stride", 2, I64, _O, None),
        ("padding_low", 3, I64, _O, None),
        ("padding_high", 4, I64, _O, None),
        ("window_dilation", 5, I64, _O, None),
        ("base_dilation", 6, I64, _O, None),
        ("window_reversal", 7, BOOL, _O, None),
    ],
    "SliceDimensions": [
        ("start", 1, I64, _O, None),
        ("limit", 2, I64, _O, None),
        ("stride", 3, I64, _O, None),
    ],
    "PrecisionConfig": [
        ("operand_precision", 1, I32, _R, None),
        ("algorithm", 2, I32, _O, None),
    ],
    "ReplicaGroup": [
        ("replica_ids", 1, I64, _R, None),
    ],
    "SourceTarget": [
        ("source", 1, I64, _O, None),
        ("target", 2, I64, _O, None),
    ],
    "CollectiveDeviceListProto": [
        ("replica_groups", 1, MSG, _R, _m("ReplicaGroup")),
        ("iota_replica_group_list", 2, MSG, _O, _m("IotaReplicaGroupListProto")),
    ],
    "IotaReplicaGroupListProto": [
        ("num_replica_groups", 1, I64, _O, None),
        ("num_devices_per_group", 2, I64, _O, None),
        ("iota_reshape_dims", 3, I64, _R, None),
        ("iota_transpose_perm", 4, I32, _R, None),
    ],
    "MeshAxesReplicaGroupListProto": [
        ("mesh", 1, MSG, _O, _m("MeshProto")),
        ("axes", 2, MSG, _R, _m("AxisRefProto")),
    ],
    "MeshProto": [
        ("axes", 1, MSG, _R, _m("MeshAxis")),
        ("device_ids", 2, I64, _R, None),
        ("iota_transform", 3, MSG, _O, _m("IotaTransform")),
    ],
    "MeshAxis": [
        ("name", 1, STR, _O, None),
        ("size", 2, I64, _O, None),
    ],
    "IotaTransform": [
        ("reshape_dims", 1, I64, _R, None),
        ("transpose_perm", 2, I64, _R, None),
    ],
    "AxisRefProto": [
        ("mesh_axis_index", 1, I64, _O, None),
        ("sub_axis_info", 2, MSG, _O, _m("SubAxis")),
    ],
    "SubAxis": [
        ("pre_size", 1, I64, _O, None),
        ("size", 2, I64, _O, None),
    ],
    "DeviceAssignmentProto": [
        ("replica_count", 1, I32, _O, None),
        ("computation_count", 2, I32, _O, None),
        ("computation_devices", 3, MSG, _R, _m("ComputationDevice")),
    ],
    "ComputationDevice": [
        ("replica_device_ids", 1, I64, _R, None),
    ],
}
# Message-typed optional fields that proto3 tracks presence for anyway; scalars that need
# presence (none here) would be declared proto3_optional.


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    return protoschema.file_descriptor("tracelens/hlo.proto", _PKG, _MESSAGES)


@lru_cache(maxsize=1)
def _pool() -> descriptor_pool.DescriptorPool:
    return protoschema.build_pool(_file_descriptor())


def message_class(name: str) -> type:
    """The runtime class of message ``xla.<name>`` (built once per process, private pool)."""
    return protoschema.message_class(_pool(), f"{_PKG}.{name}")


def hlo_proto_class() -> type:
    """The ``xla.HloProto`` message class."""
    return message_class("HloProto")
