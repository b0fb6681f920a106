"""Build serialized ``xla.HloProto`` messages in tests with the runtime classes of
``parsers.hlo.schema`` (the same descriptor the decoder uses; field numbers from
shared/reference/hlo.md)."""

from __future__ import annotations

import json
from typing import Any

from parsers.hlo.schema import hlo_proto_class
from tracelens.core.hlo_model import PRIMITIVE_TYPES

TYPE_NUMBER = {name: num for num, (name, _) in PRIMITIVE_TYPES.items()}


def shape(msg: Any, spec: str | tuple) -> None:
    """Fill a ShapeProto from ``"bf16[4,128]"`` or a tuple of such strings."""
    if isinstance(spec, tuple):
        msg.element_type = TYPE_NUMBER["tuple"]
        for s in spec:
            shape(msg.tuple_shapes.add(), s)
        return
    dtype, dims = spec.rstrip("]").split("[")
    msg.element_type = TYPE_NUMBER[dtype]
    msg.dimensions.extend(int(d) for d in dims.split(",") if d)
    msg.layout.minor_to_major.extend(reversed(range(len(msg.dimensions))))


class ModuleBuilder:
    """Computations and instructions with 64-bit ids ``(computation_id << 32) | local``."""

    def __init__(self, name: str, program_id: int, partitions: int = 1) -> None:
        self.proto = hlo_proto_class()()
        m = self.proto.hlo_module
        m.name, m.id = name, program_id
        m.device_assignment.replica_count = 1
        m.device_assignment.computation_count = partitions
        self._ids: dict[str, int] = {}
        self._comp_ids: dict[str, int] = {}

    def computation(self, name: str, fusion: bool = False) -> Any:
        m = self.proto.hlo_module
        c = m.computations.add(name=name, id=len(m.computations) + 1,
                               is_fusion_computation=fusion)
        self._comp_ids[name] = c.id
        return c

    def inst(self, comp: Any, name: str, opcode: str, result: str | tuple,
             operands: tuple[str, ...] = (), calls: tuple[str, ...] = (), root: bool = False,
             backend_config: dict | None = None, **fields: Any) -> Any:
        i = comp.instructions.add(name=name, opcode=opcode)
        i.id = (comp.id << 32) | len(comp.instructions)
        self._ids[name] = i.id
        shape(i.shape, result)
        i.operand_ids.extend(self._ids[o] for o in operands)
        i.called_computation_ids.extend(self._comp_ids[c] for c in calls)
        if backend_config is not None:
            i.backend_config = json.dumps(backend_config).encode()
        for key, value in fields.items():
            target = getattr(i, key)
            if callable(value):
                value(target)
            elif isinstance(value, (list, tuple)):
                target.extend(value)
            else:
                setattr(i, key, value)
        if root:
            comp.root_id = i.id
        return i

    def entry(self, comp: Any) -> None:
        m = self.proto.hlo_module
        m.entry_computation_name, m.entry_computation_id = comp.name, comp.id

    def bytes(self) -> bytes:
        return self.proto.SerializeToString()
