"""The step program as a serialized ``xla.HloProto``: one instruction per recipe
(:mod:`tracelens_dev.synth.recipes`), built with the runtime message classes of
:mod:`parsers.hlo.schema` (field numbers: shared/reference/hlo.md §2).

What a JAX GPU program's proto holds, as far as the cost model and XProf read it:

- one module (``HloModuleProto.id`` = the program id, SPMD ``device_assignment`` of
  1 replica × n partitions with its devices, ``host_program_shape``), computations callees
  first and the entry (``main.<id>``) last, 64-bit ids ``(computation id << 32) | local id``;
- GEMM custom calls returning ``(result, s8 workspace)`` with the dot dimension numbers in
  ``backend_config.gemm_backend_config`` (JSON, int64 as strings), read through a
  ``get-tuple-element``; Triton GEMMs as ``kCustom`` fusions whose body holds the ``dot``;
- attention custom calls: cuDNN with ``cudnn_fmha_backend_config`` (bmm dimension numbers,
  causal mask), Transformer Engine FFI calls (API version 4) with an attribute dictionary;
- loop/input fusions calling their own fused computation (reducers shared);
- ``sort`` with a comparator, ``copy``, and collectives: ``all-gather-start``/``-done``,
  ``all-reduce-start``/``-done``, ``all-reduce``, ``all-to-all`` and an ``async-start``/``-done``
  pair wrapping ``reduce-scatter`` in an async computation, each with a channel id and its
  replica groups in the encoding the recipe asks for.

Operands are data flow where it exists: an activation operand is the latest value of that
shape the program computed (through a ``bitcast`` when only the element count matches), else
an entry parameter; weights are fresh parameters. Fields our runtime schema leaves out but XLA
needs to rebuild the module (``host_program_shape``) are appended as raw protobuf fields,
which the runtime keeps and re-serializes; constant literals and comparison directions are
written as raw bytes too, in the fields the schema now decodes (``tracelens.hlo.tripcount``
reads them).
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

from parsers.hlo.schema import hlo_proto_class, message_class
from tracelens.core.hlo_model import PRIMITIVE_TYPES
from tracelens_dev.wire import field_bytes
from tracelens_dev.synth.recipes import (Arr, Attention, Collective, Copy, Fusion, Gemm, In, Recipe,
                                     Shape, Sort)

TYPE_NUMBER = {name: num for num, (name, _) in PRIMITIVE_TYPES.items()}
ENTRY_ID = 1




def set_shape(msg: Any, shape: Shape) -> None:
    """Fill a ShapeProto (arrays row-major: minor_to_major = rank−1 … 0)."""
    if not isinstance(shape, Arr):
        msg.element_type = TYPE_NUMBER["tuple"]
        for s in shape:
            set_shape(msg.tuple_shapes.add(), s)
        return
    msg.element_type = TYPE_NUMBER[shape.dtype]
    msg.dimensions.extend(shape.dims)
    msg.layout.SetInParent()
    msg.layout.minor_to_major.extend(reversed(range(len(shape.dims))))


def _shape_bytes(shape: Shape) -> bytes:
    msg = message_class("ShapeProto")()
    set_shape(msg, shape)
    return msg.SerializeToString()


class _Names:
    """Module-wide unique names ``base.N`` that never take a reserved name."""

    def __init__(self, reserved: set[str]) -> None:
        self.used = set(reserved)
        self.counts: dict[str, int] = {}

    def __call__(self, base: str) -> str:
        n = self.counts.get(base, 0)
        while True:
            n += 1
            name = f"{base}.{n}"
            if name not in self.used:
                break
        self.counts[base] = n
        self.used.add(name)
        return name


class _Comp:
    """One computation being built: instructions with ids, names resolved to ids."""

    def __init__(self, msg: Any, comp_id: int, name: str, fusion: bool = False) -> None:
        self.msg = msg
        msg.name, msg.id, msg.is_fusion_computation = name, comp_id, fusion
        self.ids: dict[str, int] = {}
        self.shapes: dict[str, Shape] = {}

    def add(self, name: str, opcode: str, shape: Shape, operands: tuple[str, ...] = (),
            called: tuple[int, ...] = (), root: bool = False, **fields: Any) -> Any:
        i = self.msg.instructions.add(name=name, opcode=opcode)
        i.id = (self.msg.id << 32) | len(self.msg.instructions)
        set_shape(i.shape, shape)
        i.operand_ids.extend(self.ids[o] for o in operands)
        i.called_computation_ids.extend(called)
        for key, value in fields.items():
            target = getattr(i, key)
            if isinstance(value, (list, tuple)):
                target.extend(value)
            else:
                setattr(i, key, value)
        self.ids[name], self.shapes[name] = i.id, shape
        if root:
            self.msg.root_id = i.id
        return i


class HloWriter:
    """Builds the program's HloProto from recipes, in program order."""

    def __init__(self, module: str, program_id: int, partitions: int,
                 reserved: set[str]) -> None:
        self.proto = hlo_proto_class()()
        m = self.proto.hlo_module
        m.name, m.id = module, program_id
        m.entry_computation_name, m.entry_computation_id = f"main.{program_id}", ENTRY_ID
        da = m.device_assignment
        da.replica_count, da.computation_count = 1, partitions
        for p in range(partitions):
            da.computation_devices.add().replica_device_ids.append(p)
        self.partitions = partitions
        self.names = _Names(reserved)
        self.comp_names = _Names(set())
        self.entry = _Comp(message_class("HloComputationProto")(), ENTRY_ID,
                           m.entry_computation_name)
        self.params: list[tuple[str, Arr]] = []
        self.latest: dict[Arr, str] = {}
        self.by_count: dict[tuple[str, int], str] = {}
        self.reducers: dict[str, int] = {}
        self.channel = 0
        self.last_value = ""

    # -- computations ----------------------------------------------------------------------
    def _computation(self, name: str, fusion: bool = False) -> _Comp:
        m = self.proto.hlo_module
        return _Comp(m.computations.add(), len(m.computations) + 1, name, fusion)

    def reducer(self, key: str) -> int:
        """A shared scalar computation: ``add_f32``, ``add_bf16`` or ``compare`` (the sort
        comparator of bf16 keys with s32 values, descending)."""
        if key not in self.reducers:
            if key == "compare":
                c = self._computation(self.comp_names("region_compare"))
                params = [c.add(self.names(base), "parameter", Arr(t), parameter_number=k).name
                          for k, (base, t) in enumerate((("lhs", "bf16"), ("rhs", "bf16"),
                                                         ("lhs_index", "s32"),
                                                         ("rhs_index", "s32")))]
                cmp = c.add(self.names("compare"), "compare", Arr("pred"), tuple(params[:2]),
                            root=True)
                cmp.MergeFromString(field_bytes(63, b"GT"))  # comparison_direction
            else:
                dtype = key.split("_")[1]
                c = self._computation(self.comp_names(f"region_add_{dtype}"))
                x = c.add(self.names("x"), "parameter", Arr(dtype), parameter_number=0).name
                y = c.add(self.names("y"), "parameter", Arr(dtype), parameter_number=1).name
                c.add(self.names("add"), "add", Arr(dtype), (x, y), root=True)
            self.reducers[key] = c.msg.id
        return self.reducers[key]

    # -- entry values ------------------------------------------------------------------------
    def _param(self, arr: Arr) -> str:
        k = len(self.params)
        name = self.names(f"Arg_{k}")
        self.entry.add(name, "parameter", arr, parameter_number=k)
        self.params.append((name, arr))
        return name

    def _value(self, inp: In) -> str:
        arr = inp.arr
        if not inp.weight:
            if arr in self.latest:
                return self.latest[arr]
            same = self.by_count.get((arr.dtype, arr.elements))
            if same is not None:
                name = self.names("bitcast")
                self.entry.add(name, "bitcast", arr, (same,))
                self._produced(name, arr)
                return name
        return self._param(arr)

    def _produced(self, name: str, shape: Shape) -> None:
        if isinstance(shape, Arr):
            self.latest[shape] = name
            self.by_count[(shape.dtype, shape.elements)] = name
            self.last_value = name

    def _unpack(self, name: str, shape: Shape, skip_last: bool = False) -> None:
        """get-tuple-element of every array a tuple-valued op returns (not its workspace)."""
        parts = list(shape)[:-1] if skip_last else list(shape)
        for k, part in enumerate(parts):
            gte = self.names("get-tuple-element")
            self.entry.add(gte, "get-tuple-element", part, (name,), tuple_index=k)
            self._produced(gte, part)

    # -- recipes -------------------------------------------------------------------------------
    def add(self, r: Recipe) -> None:
        operands = tuple(self._value(i) for i in r.inputs())
        if isinstance(r, Gemm):
            self._gemm(r, operands)
        elif isinstance(r, Attention):
            self._attention(r, operands)
        elif isinstance(r, Fusion):
            self._fusion(r, operands)
        elif isinstance(r, Sort):
            self.entry.add(r.op, "sort", r.result(), operands, (self.reducer("compare"),),
                           dimensions=[len(r.keys.dims) - 1])
            self._unpack(r.op, r.result())
        elif isinstance(r, Copy):
            self.entry.add(r.op, "copy", r.arr, operands)
            self._produced(r.op, r.arr)
        elif isinstance(r, Collective):
            self._collective(r, operands)
        else:  # pragma: no cover - every recipe type is handled above
            raise TypeError(type(r).__name__)

    def _gemm(self, r: Gemm, operands: tuple[str, ...]) -> None:
        lc, rc, lb, rb = r.dims()
        if r.triton:
            body = self._computation(self.comp_names(f"{r.op}_computation"), fusion=True)
            lhs, rhs = r.operands()
            p0 = body.add(self.names("parameter_0"), "parameter", lhs, parameter_number=0).name
            p1 = body.add(self.names("parameter_1"), "parameter", rhs, parameter_number=1).name
            acc = Arr("f32", r.out().dims)
            dot = body.add(self.names("dot"), "dot", acc, (p0, p1))
            _dot_dims(dot.dot_dimension_numbers, lc, rc, lb, rb)
            dot.precision_config.operand_precision.extend([0, 0])
            body.add(self.names("convert"), "convert", r.out(), (dot.name,), root=True)
            cfg = {"operation_queue_id": "0", "wait_on_operation_queues": [],
                   "fusion_backend_config": {
                       "kind": "__triton_gemm",
                       "triton_gemm_config": {"block_m": "128", "block_n": "128",
                                              "block_k": "64", "split_k": "1",
                                              "num_stages": "2", "num_warps": "8",
                                              "num_ctas": "1"}},
                   "force_earliest_schedule": False}
            self.entry.add(r.op, "fusion", r.out(), operands, (body.msg.id,),
                           fusion_kind="kCustom", backend_config=_json(cfg))
            self._produced(r.op, r.out())
            return
        lhs, rhs = r.operands()
        cfg = {"operation_queue_id": "0", "wait_on_operation_queues": [],
               "gemm_backend_config": {
                   "selected_algorithm": str(zlib.crc32(r.op.encode()) % 100_000),
                   "alpha_real": 1, "beta": 0,
                   "dot_dimension_numbers": {
                       "lhs_contracting_dimensions": [str(d) for d in lc],
                       "rhs_contracting_dimensions": [str(d) for d in rc],
                       "lhs_batch_dimensions": [str(d) for d in lb],
                       "rhs_batch_dimensions": [str(d) for d in rb]},
                   "alpha_imag": 0,
                   "precision_config": {"operand_precision": ["DEFAULT", "DEFAULT"],
                                        "algorithm": "ALG_UNSET"},
                   "epilogue": "DEFAULT",
                   "lhs_stride": str(lhs.elements // r.batch),
                   "rhs_stride": str(rhs.elements // r.batch),
                   "grad_x": r.use == "dgrad", "grad_y": r.use == "wgrad",
                   "damax_output": False},
               "force_earliest_schedule": False, "reification_cost": [],
               "device_type": "DEVICE_TYPE_INVALID"}
        cc = self.entry.add(r.op, "custom-call", r.result(), operands,
                            custom_call_target=r.target, custom_call_api_version=1,
                            backend_config=_json(cfg))
        cc.precision_config.SetInParent()  # present but empty on GEMM custom calls
        self._unpack(r.op, r.result(), skip_last=True)

    def _attention(self, r: Attention, operands: tuple[str, ...]) -> None:
        if r.cudnn:
            bsnh = {"lhs_batch_dimensions": ["0", "2"], "rhs_batch_dimensions": ["0", "2"]}
            cfg: dict[str, Any] = {
                "algorithm": {"algo_id": "0", "math_type": "TENSOR_OP_MATH",
                              "is_cudnn_frontend": True, "workspace_size": str(r.workspace)},
                "bmm1_dot_dimension_numbers": {"lhs_contracting_dimensions": ["3"],
                                               "rhs_contracting_dimensions": ["3"], **bsnh},
                "bmm2_dot_dimension_numbers": {"lhs_contracting_dimensions": ["3"],
                                               "rhs_contracting_dimensions": ["1"],
                                               "lhs_batch_dimensions": ["0", "1"],
                                               "rhs_batch_dimensions": ["0", "2"]},
                "intermediate_tensor_shape": {
                    "element_type": "BF16", "dimensions": [str(d) for d in
                                                           (r.b, r.heads, r.s, r.s)],
                    "layout": {"minor_to_major": ["3", "2", "1", "0"]}},
            }
            if r.backward:
                cfg.update({
                    "bmm1_grad_gemm1_dot_dimension_numbers": {
                        "lhs_contracting_dimensions": ["2"], "rhs_contracting_dimensions": ["1"],
                        "lhs_batch_dimensions": ["0", "1"], "rhs_batch_dimensions": ["0", "2"]},
                    "bmm2_grad_gemm2_dot_dimension_numbers": {
                        "lhs_contracting_dimensions": ["2"], "rhs_contracting_dimensions": ["1"],
                        "lhs_batch_dimensions": ["0", "1"], "rhs_batch_dimensions": ["0", "2"]}})
            cfg.update({"fmha_scale": round(r.hd ** -0.5, 8), "dropout_rate": 0, "seed": "42",
                        "is_flash_attention": True, "mask_type": "CAUSAL",
                        "sliding_window_length": 0})
            self.entry.add(r.op, "custom-call", r.result(), operands,
                           custom_call_target=r.target(), custom_call_api_version=1,
                           backend_config=_json({"operation_queue_id": "0",
                                                 "wait_on_operation_queues": [],
                                                 "cudnn_fmha_backend_config": cfg,
                                                 "force_earliest_schedule": False}))
            self._unpack(r.op, r.result(), skip_last=True)
            return
        shape = (f"attn_heads = {r.heads} : i64, bias_heads = 0 : i64, input_batch = {r.b} : "
                 f"i64, kv_max_seqlen = {r.s} : i64, " if r.te_full else "")
        dims = (f"num_gqa_groups = {r.kv_heads} : i64, q_max_seqlen = {r.s} : i64, "
                f"qk_head_dim = {r.hd} : i64, " if r.te_full else "")
        attrs = (f"{{attn_bias_type = 0 : i64, {shape}deterministic = false, "
                 f"dropout_probability = 0.000000e+00 : f32, is_training = true, mask_type = "
                 f"2 : i64, max_segments_per_seq = 1 : i64, {dims}qkv_layout = "
                 f"{9 if r.te_full else 2} : i64, scaling_factor = {r.hd ** -0.5:.6e} : f32, "
                 f"{f'v_head_dim = {r.hd} : i64, ' if r.te_full else ''}window_size_left = "
                 f"-1 : i64, window_size_right = 0 : i64}}")
        self.entry.add(r.op, "custom-call", r.result(), operands,
                       custom_call_target=r.target(), custom_call_api_version=4,
                       backend_config=attrs.encode())
        self._unpack(r.op, r.result())

    def _fusion(self, r: Fusion, operands: tuple[str, ...]) -> None:
        for *_, attrs in r.body.insts:  # callees before callers
            if "to_apply" in attrs:
                self.reducer(attrs["to_apply"])
        body = self._computation(self.comp_names("fused_computation"), fusion=True)
        local: dict[str, str] = {}
        last = len(r.body.insts) - 1
        for k, (loc, opcode, shape, ops, attrs) in enumerate(r.body.insts):
            fields: dict[str, Any] = {}
            called: tuple[int, ...] = ()
            if opcode == "parameter":
                name = self.names(f"param_{attrs['parameter_number']}")
                fields["parameter_number"] = attrs["parameter_number"]
            else:
                name = self.names(opcode)
            if "dimensions" in attrs:
                fields["dimensions"] = attrs["dimensions"]
            if "to_apply" in attrs:
                called = (self.reducer(attrs["to_apply"]),)
            inst = body.add(name, opcode, shape, tuple(local[o] for o in ops), called,
                            root=k == last, **fields)
            for start, limit in attrs.get("slices", ()):
                inst.slice_dimensions.add(start=start, limit=limit, stride=1)
            if opcode == "constant":
                inst.MergeFromString(field_bytes(8, _literal_f32(attrs["value"])))
            local[loc] = name
        self.entry.add(r.op, "fusion", r.result(), operands, (body.msg.id,),
                       fusion_kind=r.fusion_kind)
        if isinstance(r.result(), Arr):
            self._produced(r.op, r.result())
        else:
            self._unpack(r.op, r.result())

    def _collective(self, r: Collective, operands: tuple[str, ...]) -> None:
        self.channel += 1
        suffix = r.op.rsplit(".", 1)[1]
        common: dict[str, Any] = {"channel_id": self.channel}
        if r.ctype != "all-to-all":
            common["use_global_device_ids"] = True
        if r.ctype == "all-gather":
            start = self.entry.add(r.op, "all-gather-start", (r.operand, r.out), operands,
                                   dimensions=[0], **common)
            _groups(start, r)
            done = f"all-gather-done.{suffix}"
            self.names.used.add(done)
            self.entry.add(done, "all-gather-done", r.out, (r.op,))
            self._produced(done, r.out)
        elif r.ctype == "all-reduce" and not r.sync:
            start = self.entry.add(r.op, "all-reduce-start", r.out, operands,
                                   (self.reducer(f"add_{r.out.dtype}"),), **common)
            _groups(start, r)
            done = f"all-reduce-done.{suffix}"
            self.names.used.add(done)
            self.entry.add(done, "all-reduce-done", r.out, (r.op,))
            self._produced(done, r.out)
        elif r.ctype == "all-reduce":
            inst = self.entry.add(r.op, "all-reduce", r.out, operands,
                                  (self.reducer(f"add_{r.out.dtype}"),), **common)
            _groups(inst, r)
            self._produced(r.op, r.out)
        elif r.ctype == "collective-permute":  # ``groups``: its (source, target) pairs
            inst = self.entry.add(r.op, "collective-permute", r.out, operands,
                                  channel_id=self.channel)
            for src, dst in r.groups or ():
                inst.source_target_pairs.add(source=src, target=dst)
            self._produced(r.op, r.out)
        elif r.ctype == "all-to-all":
            inst = self.entry.add(r.op, "all-to-all", r.out, operands, dimensions=[0],
                                  **common)
            _groups(inst, r)
            self._produced(r.op, r.out)
        else:  # reduce-scatter: async-start wrapping the collective
            add = self.reducer(f"add_{r.out.dtype}")
            body = self._computation(self.comp_names("async_computation"))
            p = body.add(self.names("param_0"), "parameter", r.operand, parameter_number=0)
            rs = body.add(r.op, "reduce-scatter", r.out, (p.name,), (add,), root=True,
                          dimensions=[0],
                          **common)
            _groups(rs, r)
            start, done = f"reduce-scatter-start.{suffix}", f"reduce-scatter-done.{suffix}"
            self.names.used.update((start, done))
            self.entry.add(start, "async-start", ((r.operand,), r.out), operands,
                           (body.msg.id,))
            self.entry.add(done, "async-done", r.out, (start,), (body.msg.id,))
            self._produced(done, r.out)

    # -- the module ------------------------------------------------------------------------------
    def serialize(self) -> bytes:
        root_shape = self.entry.shapes[self.last_value] if self.last_value else Arr("f32")
        root = self.names("tuple")
        self.entry.add(root, "tuple", (root_shape,),
                       (self.last_value,) if self.last_value else (), root=True)
        m = self.proto.hlo_module
        m.computations.append(self.entry.msg)  # the entry comes last
        program = b"".join(field_bytes(1, _shape_bytes(a)) for _, a in self.params) + \
            field_bytes(2, _shape_bytes((root_shape,))) + \
            b"".join(field_bytes(3, name.encode()) for name, _ in self.params)
        m.MergeFromString(field_bytes(4, program))  # host_program_shape
        return self.proto.SerializeToString()


def _json(cfg: dict) -> bytes:
    return json.dumps(cfg, separators=(",", ":")).encode()


def _dot_dims(msg: Any, lc: list[int], rc: list[int], lb: list[int], rb: list[int]) -> None:
    msg.lhs_contracting_dimensions.extend(lc)
    msg.rhs_contracting_dimensions.extend(rc)
    msg.lhs_batch_dimensions.extend(lb)
    msg.rhs_batch_dimensions.extend(rb)


def _literal_f32(value: float) -> bytes:
    """LiteralProto of an f32 scalar: shape (1), f32s (8, packed)."""
    return field_bytes(1, _shape_bytes(Arr("f32"))) + field_bytes(8, struct.pack("<f", value))


def _groups(inst: Any, r: Collective) -> None:
    """The replica groups of ``r`` in its encoding (hlo.md §2.8, §5)."""
    n, g, hosts = r.hosts * r.gpus, r.gpus, r.hosts
    per_host = r.group == "host"
    explicit = [list(range(h * g, (h + 1) * g)) for h in range(hosts)] if per_host \
        else [list(range(n))]
    if r.groups:  # a mesh axis's groups (tests of the axes analysis): explicit or list only
        explicit = [list(grp) for grp in r.groups]
    if r.encoding == "explicit":
        for grp in explicit:
            inst.replica_groups.add().replica_ids.extend(grp)
    elif r.encoding == "list":
        for grp in explicit:
            inst.collective_device_list.replica_groups.add().replica_ids.extend(grp)
    elif r.encoding == "mesh":
        ml = inst.mesh_axes_replica_group_list
        ml.mesh.axes.add(name="host", size=hosts)
        ml.mesh.axes.add(name="gpu", size=g)
        ml.axes.add(mesh_axis_index=1 if per_host else 0)
        if not per_host:
            ml.axes.add(mesh_axis_index=1)
    else:  # XLA always writes the permutation, identity included (without it, XProf's
        # XLA aborts expanding the groups)
        io = inst.iota_collective_device_list
        io.num_replica_groups = len(explicit)
        io.num_devices_per_group = len(explicit[0])
        if r.encoding == "iota_transposed":  # [1,n]<=[g,hosts]T(1,0): one group, host-major
            io.iota_reshape_dims.extend([g, hosts])
            io.iota_transpose_perm.extend([1, 0])
        else:  # [G,S]<=[n]
            io.iota_reshape_dims.append(n)
            io.iota_transpose_perm.append(0)


def program_proto(module: str, program_id: int, partitions: int,
                  recipes: list[Recipe]) -> bytes:
    """The serialized ``xla.HloProto`` of a program whose kernels name ``recipes`` (each op
    once, in program order)."""
    w = HloWriter(module, program_id, partitions, {r.op for r in recipes})
    for r in recipes:
        w.add(r)
    return w.serialize()
