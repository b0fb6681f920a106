"""A small parser for XLA's HLO text dumps (``*.after_optimizations.txt``) into
:mod:`tracelens.core.hlo_model`: enough for the cost model (shapes, opcodes, operands, called
computations, dot/conv attributes, custom-call target, backend config, replica groups).

Handles both operand spellings XLA has printed: with shapes (``dot(f32[2,3]{1,0} %a, ...)``)
and bare (``dot(a, b)``); ``%`` prefixes optional; tuple shapes; layouts ``{1,0}`` (and tiled
layouts ``{1,0:T(8,128)}``) ignored; ``replica_groups={{0,1},{2,3}}`` and the iota form
``replica_groups=[2,4]<=[4,2]T(1,0)``. The mesh-axes form has no text spelling we have seen,
so it is not parsed (the group size stays unknown). The dump's file name
``module_0049.jit_dot....txt`` gives the program id (the module's unique id).
"""

from __future__ import annotations

import re
from pathlib import Path

from parsers.hlo.attrs import parse_attribute_dict
from parsers.hlo.replica_groups import iota_groups
from tracelens.core.hlo_model import (Computation, ConvDims, DotDims, Instruction, Module, Shape,
                                 WindowDim)

_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")
_HEADER = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*(?:\(.*\))?\s*(?:->.*)?\{\s*$")
_INSTR = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_MODULE = re.compile(r"^\s*HloModule\s+([\w.\-]+)")
_FILE_ID = re.compile(r"module_(\d+)\.")
_COMMENT = re.compile(r"/\*.*?\*/")


def _match_close(s: str, i: int) -> int:
    """Index just past the bracket that closes the one at ``s[i]`` (quotes respected)."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack = []
    j = i
    quote = False
    while j < len(s):
        c = s[j]
        if quote:
            if c == "\\":
                j += 2
                continue
            if c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return j + 1
        j += 1
    raise ValueError(f"unbalanced brackets in: {s[i:i + 80]}")


def _split_top(s: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside brackets and quotes."""
    out, depth, quote, start, j = [], 0, False, 0, 0
    while j < len(s):
        c = s[j]
        if quote:
            if c == "\\":
                j += 2
                continue
            if c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == sep and depth == 0:
            out.append(s[start:j])
            start = j + 1
        j += 1
    out.append(s[start:])
    return [p.strip() for p in out if p.strip()]


def parse_shape(s: str, i: int = 0) -> tuple[Shape, int]:
    """The shape starting at ``s[i]`` and the index after it (layout included)."""
    while i < len(s) and s[i] == " ":
        i += 1
    if s[i] == "(":
        end = _match_close(s, i)
        inner = s[i + 1:end - 1]
        parts = [parse_shape(p)[0] for p in _split_top(inner)] if inner.strip() else []
        return Shape("tuple", (), tuple(parts)), end
    m = _ARRAY.match(s, i)
    if not m:
        m2 = re.compile(r"([a-z][a-z0-9]*)").match(s, i)  # token[] etc.
        if not m2:
            raise ValueError(f"no shape at: {s[i:i + 40]}")
        return Shape(m2.group(1), ()), m2.end()
    dims = tuple(int(d.strip().lstrip("<=")) for d in m.group(2).split(",") if d.strip())
    j = m.end()
    if j < len(s) and s[j] == "{":
        j = _match_close(s, j)
    return Shape(m.group(1), dims), j


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"-?\d+", text))


def _window(text: str) -> tuple[WindowDim, ...]:
    fields = dict(p.split("=", 1) for p in text.strip("{} ").split() if "=" in p)
    sizes = [int(x) for x in fields.get("size", "").split("x") if x]
    n = len(sizes)

    def per_dim(key: str, default: int) -> list[int]:
        v = fields.get(key)
        return [int(x) for x in v.split("x")] if v else [default] * n
    strides, lhs_d, rhs_d = per_dim("stride", 1), per_dim("lhs_dilate", 1), per_dim(
        "rhs_dilate", 1)
    pads = [tuple(int(y) for y in x.split("_")) for x in fields["pad"].split("x")] \
        if "pad" in fields else [(0, 0)] * n
    return tuple(WindowDim(sizes[k], strides[k], pads[k][0], pads[k][1], rhs_d[k], lhs_d[k])
                 for k in range(n))


def _dim_labels(text: str) -> ConvDims:
    """``bf012_oi012->bf012``: input, kernel and output dimension roles."""
    lhs, rest = text.split("_", 1)
    rhs, out = rest.split("->")

    def spatial(labels: str) -> tuple[int, ...]:
        digits = sorted((int(c), i) for i, c in enumerate(labels) if c.isdigit())
        return tuple(i for _, i in digits)
    return ConvDims(lhs.index("b"), lhs.index("f"), spatial(lhs), rhs.index("i"), rhs.index("o"),
                    spatial(rhs), out.index("b"), out.index("f"), spatial(out))


def _replica_groups(text: str) -> list[list[int]] | None:
    text = text.strip()
    m = re.fullmatch(r"\[(\d+),(\d+)\]<=\[([\d,]*)\](?:T\(([\d,]*)\))?", text)
    if m:
        return iota_groups(int(m.group(1)), int(m.group(2)), _ints(m.group(3)),
                           _ints(m.group(4) or ""))
    if text.startswith("{"):
        inner = text[1:-1].strip()
        return [list(_ints(g)) for g in _split_top(inner)] if inner else []
    return None


def scalar_literal(shape: Shape, text: str) -> int | float | bool | None:
    """The value of a scalar ``constant(...)`` as XLA prints it (``4``, ``-3``, ``true``,
    ``0.0025``, ``-inf``, ``nan``); None for arrays, tuples and anything else."""
    text = text.strip()
    if shape.is_tuple or shape.dims or not text:
        return None
    if shape.dtype == "pred":
        return {"true": True, "false": False}.get(text)
    try:
        if re.fullmatch(r"[su]\d+", shape.dtype):
            return int(text) if re.fullmatch(r"-?\d{1,40}", text) else None
        return float(text)
    except ValueError:
        return None


def _unquote(v: str) -> str:
    v = v.strip()
    if v.startswith('"') and v.endswith('"'):
        return bytes(v[1:-1], "utf-8").decode("unicode_escape")
    return v


def parse_instruction(line: str) -> tuple[Instruction, bool] | None:
    """One instruction line, and whether it is the ROOT; None for anything else."""
    m = _INSTR.match(line)
    if not m:
        return None
    body = m.group(3)
    shape, i = parse_shape(body)
    om = re.compile(r"\s*([\w\-]+)\(").match(body, i)
    if not om:
        return None
    open_at = om.end() - 1
    close = _match_close(body, open_at)
    operands = []
    for op in _split_top(body[open_at + 1:close - 1]):
        token = op.split()[-1] if op.split() else op
        operands.append(token.lstrip("%"))
    inst = Instruction(name=m.group(2), opcode=om.group(1), shape=shape, operands=tuple(operands))
    if inst.opcode == "parameter" and len(operands) == 1 and operands[0].isdigit():
        inst.parameter_number = int(operands[0])
    elif inst.opcode == "constant":
        inst.literal = scalar_literal(shape, body[open_at + 1:close - 1])
    attrs = _split_top(body[close:].lstrip(", "))
    lhs_c = rhs_c = lhs_b = rhs_b = None
    for attr in attrs:
        if "=" not in attr:
            continue
        key, value = attr.split("=", 1)
        key = key.strip()
        if key in ("calls", "to_apply", "condition", "body", "called_computations",
                   "branch_computations"):
            names = re.findall(r"%?([\w.\-]+)", value)
            inst.called += tuple(names)
        elif key == "kind":
            inst.fusion_kind = value.strip()
        elif key == "dimensions":
            inst.dimensions = _ints(value)
        elif key == "lhs_contracting_dims":
            lhs_c = _ints(value)
        elif key == "rhs_contracting_dims":
            rhs_c = _ints(value)
        elif key == "lhs_batch_dims":
            lhs_b = _ints(value)
        elif key == "rhs_batch_dims":
            rhs_b = _ints(value)
        elif key == "lhs_ragged_dims":
            inst.lhs_ragged_dims = _ints(value)
        elif key == "window":
            inst.window = _window(value)
        elif key == "dim_labels":
            inst.conv = _dim_labels(value.strip())
        elif key == "feature_group_count":
            inst.feature_group_count = int(value)
        elif key == "batch_group_count":
            inst.batch_group_count = int(value)
        elif key == "custom_call_target":
            inst.custom_call_target = _unquote(value)
        elif key == "backend_config":
            inst.backend_config_text = _unquote(value)
        elif key == "replica_groups":
            inst.replica_groups = _replica_groups(value)
        elif key == "channel_id":
            inst.channel_id = int(value)
        elif key == "use_global_device_ids":
            inst.use_global_device_ids = value.strip() == "true"
        elif key == "index":
            inst.tuple_index = int(value)
        elif key == "source_target_pairs":
            inst.source_target_pairs = tuple(tuple(_ints(p)) for p in _split_top(
                value.strip()[1:-1]))
        elif key == "direction" and inst.opcode == "compare":
            inst.comparison_direction = value.strip()
        elif key == "type" and inst.opcode == "compare":
            inst.comparison_type = value.strip()
        elif key == "metadata":
            om2 = re.search(r'op_name="((?:[^"\\]|\\.)*)"', value)
            inst.op_name = om2.group(1) if om2 else ""
    if any(x is not None for x in (lhs_c, rhs_c, lhs_b, rhs_b)):
        inst.dot = DotDims(lhs_c or (), rhs_c or (), lhs_b or (), rhs_b or ())
    if inst.opcode == "custom-call":
        inst.ffi_attributes = parse_attribute_dict(inst.backend_config_text)
    return inst, bool(m.group(1))


def parse_module(text: str, program_id: int | None = None, name: str | None = None) -> Module:
    """One module from HLO text. Lines that are neither headers nor instructions are skipped."""
    module = Module(name=name or "", program_id=program_id, entry="")
    comp: Computation | None = None
    last_entry = ""
    for raw in text.splitlines():
        # /*index=5*/ comments sit inside long tuples: drop the comment, keep the line
        line = _COMMENT.sub("", raw).rstrip() if "/*" in raw else raw.rstrip()
        if not line.strip() or line.strip().startswith("//"):
            continue
        mm = _MODULE.match(line)
        if mm:
            module.name = module.name or mm.group(1)
            continue
        if comp is None:
            hm = _HEADER.match(line)
            if hm and " = " not in line:
                comp = Computation(name=hm.group(2))
                if hm.group(1):
                    last_entry = comp.name
            continue
        if line.strip() == "}":
            if not comp.root and comp.instructions:
                comp.root = next(reversed(comp.instructions))
            module.computations[comp.name] = comp
            comp = None
            continue
        parsed = parse_instruction(line)
        if parsed:
            inst, is_root = parsed
            comp.instructions[inst.name] = inst
            if is_root:
                comp.root = inst.name
    for c in module.computations.values():
        c.is_fusion = False
    for c in module.computations.values():
        for inst in c.instructions.values():
            if inst.opcode == "fusion":
                for callee in inst.called:
                    if callee in module.computations:
                        module.computations[callee].is_fusion = True
    module.entry = last_entry or (next(reversed(module.computations)) if module.computations
                                  else "")
    if not module.entry:
        raise ValueError("no HLO computation found in the text")
    return module


def load_text_dump(path: str | Path, program_id: int | None = None) -> Module:
    """Parse an ``*.after_optimizations.txt`` dump; the program id comes from the file name
    (``module_0049.``) unless given."""
    path = Path(path)
    if program_id is None:
        m = _FILE_ID.search(path.name)
        program_id = int(m.group(1)) if m else None
    return parse_module(path.read_text(errors="replace"), program_id=program_id)
