"""How many times a ``while`` runs its body: from ``known_trip_count``, else from its condition.

XLA's trip-count annotator writes ``known_trip_count.n`` into a while's backend config when it
can derive the count (hlo.md §6). Without it, the count is re-derived here from the loop itself,
only in the one shape whose answer is exact:

- the condition's root is ``compare(counter, bound)`` (directly or as a fusion's root, either
  operand order, through copies and value-preserving integer converts) with a direction LT,
  LE, GT, GE, NE or EQ;
- the counter is an integer element of the loop state whose body update is
  ``counter + constant`` or ``counter - constant``;
- its initial value and the bound are constants: in the condition, or the state element's
  constant in the while's init tuple (through copies), the bound also as a state element the
  body passes through unchanged.

The count is then the number of iterations before the compare fails, in exact integer
arithmetic (0 when it fails at once). Anything else stays unknown with the reason: a bound or
initial value that is not a constant (data-dependent), an update other than ± a constant, a
floating-point counter or compare, a counter that would wrap around its type before the loop
ends.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from tracelens.core.hlo_model import Computation, Instruction, Module

MAX_DEPTH = 32  # instructions followed per value; HLO expression chains here are short
PASS_THROUGH = ("copy", "bitcast", "reshape")
SYMBOL = {"LT": "<", "LE": "<=", "GT": ">", "GE": ">=", "NE": "!=", "EQ": "=="}
SIGNEDNESS = {"s": "SIGNED", "u": "UNSIGNED"}
FLIP = {"LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE", "NE": "NE", "EQ": "EQ"}
_INT = re.compile(r"([su])(\d+)")


@dataclass(frozen=True)
class TripCount:
    """A while's trip count (None: unknown), where it came from, and how or why not."""

    n: int | None
    source: str  # "known_trip_count", "condition", or "" when unknown
    note: str    # how it was derived from the condition, or why it is unknown


@dataclass(frozen=True)
class _Elem:
    index: int  # element of the loop state; -1: the whole (non-tuple) state
    dtype: str


@dataclass(frozen=True)
class _Const:
    value: int | float | bool
    dtype: str


@dataclass(frozen=True)
class _Arith:
    op: str  # add | subtract
    lhs: object
    rhs: object


@dataclass(frozen=True)
class _Compare:
    direction: str
    lhs: object
    rhs: object
    dtype: str       # the element type of the compared values
    kind: str = ""   # comparison_type when given: SIGNED, UNSIGNED, FLOAT, TOTALORDER


class _Unknown(Exception):
    """Why a value cannot be read as an exact constant or counter."""


Params = Callable[[int], object]


def int_range(dtype: str) -> tuple[int, int] | None:
    """(min, max) of an integer element type (``s32``, ``u8``, ...); None for others."""
    m = _INT.fullmatch(dtype)
    if not m:
        return None
    bits = int(m.group(2))
    if m.group(1) == "s":
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def known_trip_count(inst: Instruction) -> int | None:
    """``known_trip_count.n`` of a while (JSON int64s are strings); None when absent."""
    n = inst.backend_config.get("known_trip_count", {})
    n = n.get("n") if isinstance(n, dict) else None
    try:
        return int(n) if n is not None else None
    except (TypeError, ValueError):
        return None


def while_parts(inst: Instruction, module: Module) -> tuple[str | None, str | None]:
    """(condition, body) of a while: the condition is the callee whose root is ``pred[]`` (the
    text and the proto list the two in different orders)."""
    cond = body = None
    for name in inst.called:
        comp = module.computations.get(name)
        root = comp.root_instruction if comp else None
        if root is None:
            continue
        if root.shape.dtype == "pred" and not root.shape.dims and cond is None:
            cond = name
        elif body is None:
            body = name
    return cond, body


def _convert(term: object, src: str, dst: str, name: str) -> object:
    """A convert that keeps every value of ``src`` (integer into a wider-or-equal range)."""
    rs, rd = int_range(src), int_range(dst)
    if isinstance(term, _Const) and rs is not None and rd is not None:
        if not rd[0] <= int(term.value) <= rd[1]:
            raise _Unknown(f"convert {name} changes the constant {term.value} ({src} to {dst})")
        return _Const(int(term.value), dst)
    if rs is None or rd is None:
        raise _Unknown(f"convert {name} goes {src} to {dst}: a floating-point value")
    if not (rd[0] <= rs[0] and rs[1] <= rd[1]):
        raise _Unknown(f"convert {name} narrows {src} to {dst}: values may wrap")
    return term


def _term(module: Module, comp: Computation, name: str, params: Params, depth: int = 0) -> object:
    """The value ``name`` computes in ``comp`` as a small expression over the loop state and
    constants; ``params(k)`` is the value of parameter k. Raises _Unknown with the reason."""
    inst = comp.instructions.get(name)
    if inst is None:
        raise _Unknown(f"{name} is not an instruction of {comp.name}")
    if depth > MAX_DEPTH:
        raise _Unknown(f"{name}: more than {MAX_DEPTH} instructions deep")
    op, ops = inst.opcode, inst.operands

    def sub(k: int) -> object:
        if not 0 <= k < len(ops):
            raise _Unknown(f"{op} {name} lacks operand {k}")
        return _term(module, comp, ops[k], params, depth + 1)

    if op == "parameter":
        return params(inst.parameter_number)
    if op == "constant":
        if inst.literal is None:
            raise _Unknown(f"constant {name} is not a decoded scalar")
        bounds = int_range(inst.shape.dtype)
        if bounds is not None and not bounds[0] <= int(inst.literal) <= bounds[1]:
            raise _Unknown(f"constant {name} ({inst.literal}) is outside {inst.shape.dtype}")
        return _Const(inst.literal, inst.shape.dtype)
    if op == "get-tuple-element":
        if not ops:
            raise _Unknown(f"get-tuple-element {name} lacks its operand")
        src = comp.instructions.get(ops[0])
        if src is not None and src.opcode == "tuple":
            if inst.tuple_index >= len(src.operands):
                raise _Unknown(f"{name} reads element {inst.tuple_index} of a smaller tuple")
            return _term(module, comp, src.operands[inst.tuple_index], params, depth + 1)
        whole = sub(0)
        if isinstance(whole, _Elem) and whole.index == -1:
            return _Elem(inst.tuple_index, inst.shape.dtype)
        raise _Unknown(f"get-tuple-element {name} reads a nested tuple")
    if op in PASS_THROUGH and ops:
        src = comp.instructions.get(ops[0])
        if src is None or src.shape.dtype != inst.shape.dtype or inst.shape.elements != 1:
            raise _Unknown(f"{op} {name} is not a scalar move")
        return sub(0)
    if op == "convert" and ops:
        src = comp.instructions.get(ops[0])
        if src is None:
            raise _Unknown(f"convert {name} lacks its operand")
        return _convert(sub(0), src.shape.dtype, inst.shape.dtype, name)
    if op in ("add", "subtract") and len(ops) == 2:
        return _Arith(op, sub(0), sub(1))
    if op == "compare" and len(ops) == 2:
        src = comp.instructions.get(ops[0])
        return _Compare(inst.comparison_direction, sub(0), sub(1),
                        src.shape.dtype if src is not None else "", inst.comparison_type)
    if op == "fusion" and inst.called and inst.called[0] in module.computations:
        body = module.computations[inst.called[0]]
        return _term(module, body, body.root, sub, depth + 1)
    raise _Unknown(f"{name} is a {op}, which the derivation does not follow")


def _state(shape_dtype: str) -> Params:
    def params(k: int) -> object:
        if k != 0:
            raise _Unknown(f"loop computation reads parameter {k}")
        return _Elem(-1, shape_dtype)
    return params


def _data(comp: Computation) -> Params:
    def params(k: int) -> object:
        raise _Unknown(f"it is parameter {k} of {comp.name} (data-dependent)")
    return params


def _init(module: Module, caller: Computation, inst: Instruction, index: int, what: str) -> int:
    """The constant state element ``index`` starts with (-1: the whole state)."""
    try:
        if not inst.operands:
            raise _Unknown("the while has no operand")
        name = inst.operands[0]
        if index >= 0:
            init = caller.instructions.get(name)
            for _ in range(MAX_DEPTH):  # a copy of the tuple; bounded against a cycle
                if init is None or init.opcode not in PASS_THROUGH or not init.operands:
                    break
                init = caller.instructions.get(init.operands[0])
            if init is None or init.opcode != "tuple" or index >= len(init.operands):
                raise _Unknown(f"the initial state {name} is not a tuple")
            name = init.operands[index]
        value = _term(module, caller, name, _data(caller))
    except _Unknown as exc:
        raise _Unknown(f"the initial {what} is not a constant: {exc}") from None
    if not isinstance(value, _Const) or int_range(value.dtype) is None:
        raise _Unknown(f"the initial {what} is not an integer constant")
    return int(value.value)


def _update(module: Module, body: Computation, elem: _Elem) -> object:
    """What the body writes back into state element ``elem``."""
    root = body.root_instruction
    if root is None:
        raise _Unknown(f"the body {body.name} has no root")
    name = root.name
    if elem.index >= 0:
        if root.opcode != "tuple" or elem.index >= len(root.operands):
            raise _Unknown(f"the body root {root.name} is a {root.opcode}, not a tuple")
        name = root.operands[elem.index]
    return _term(module, body, name, _state(root.shape.dtype))


def _step(update: object, elem: _Elem) -> int:
    def integer(t: object) -> bool:
        return isinstance(t, _Const) and int_range(t.dtype) is not None

    if isinstance(update, _Arith):
        if update.lhs == elem and integer(update.rhs):
            step = int(update.rhs.value)
            return step if update.op == "add" else -step
        if update.op == "add" and update.rhs == elem and integer(update.lhs):
            return int(update.lhs.value)
    raise _Unknown("the body computes it from other values")


def count(init: int, step: int, direction: str, bound: int, lo: int, hi: int) -> int | None:
    """Iterations of ``for (i = init; i <direction> bound; i += step)`` in a type [lo, hi]
    whose add wraps; None when the loop would wrap around (or never ends)."""
    holds = {"LT": init < bound, "LE": init <= bound, "GT": init > bound, "GE": init >= bound,
             "NE": init != bound, "EQ": init == bound}[direction]
    if not holds:
        return 0
    if step == 0:
        return None
    if direction == "EQ":
        return 1
    if direction == "NE":  # ends exactly on the bound, or wraps past it
        gap = bound - init
        if gap % step or gap // step < 0 or not lo <= bound <= hi:
            return None
        return gap // step
    if (direction in ("LT", "LE")) != (step > 0):
        return None  # moving away from the bound: it only ends by wrapping
    gap = abs(bound - init) + (1 if direction in ("LE", "GE") else 0)
    n = -(-gap // abs(step))
    last = init + n * step  # the value that fails the compare must still be representable
    return n if lo <= last <= hi else None


def derive(module: Module, caller: Computation, inst: Instruction) -> TripCount:
    """The trip count of the while ``inst`` of ``caller``."""
    known = known_trip_count(inst)
    if known is not None:
        return TripCount(known, "known_trip_count", "")
    try:
        return _from_condition(module, caller, inst)
    except _Unknown as exc:
        return TripCount(None, "", str(exc))


def _from_condition(module: Module, caller: Computation, inst: Instruction) -> TripCount:
    cond_name, body_name = while_parts(inst, module)
    if cond_name is None or body_name is None:
        raise _Unknown("its condition or body computation is missing")
    cond, body = module.computations[cond_name], module.computations[body_name]
    state = inst.shape.dtype
    try:
        cmp = _term(module, cond, cond.root, _state(state))
    except _Unknown as exc:
        raise _Unknown(f"the condition {cond_name} is not a compare of a counter against a "
                       f"constant: {exc}") from None
    if not isinstance(cmp, _Compare) or cmp.direction not in FLIP:
        raise _Unknown(f"the condition {cond_name} is not a compare of a counter against a "
                       "constant")
    if int_range(cmp.dtype) is None or cmp.kind not in ("", SIGNEDNESS[cmp.dtype[0]]):
        raise _Unknown(f"the condition {cond_name} compares {cmp.dtype or 'unknown'} values "
                       f"{('as ' + cmp.kind) if cmp.kind else ''}, not as integers")
    lhs, rhs, direction = cmp.lhs, cmp.rhs, cmp.direction
    if not isinstance(lhs, _Elem) or _is_bound_elem(module, body, lhs, rhs):
        lhs, rhs, direction = rhs, lhs, FLIP[direction]
    if not isinstance(lhs, _Elem):
        raise _Unknown(f"the condition {cond_name} does not compare a loop-state element")
    if int_range(lhs.dtype) is None:
        raise _Unknown(f"the counter (state element {lhs.index}) is {lhs.dtype}, not an integer")
    bound = _bound(module, caller, inst, body, rhs)
    try:
        step = _step(_update(module, body, lhs), lhs)
    except _Unknown as exc:
        raise _Unknown(f"the update of the counter (state element {lhs.index}) is not the "
                       f"counter plus or minus a constant: {exc}") from None
    init = _init(module, caller, inst, lhs.index, f"counter (state element {lhs.index})")
    lo, hi = int_range(lhs.dtype)
    n = count(init, step, direction, bound, lo, hi)
    what = f"state element {lhs.index}" if lhs.index >= 0 else "the state"
    rule = f"from {init} by {step} while {SYMBOL[direction]} {bound}"
    if n is None:
        raise _Unknown(f"{what} counting {rule} wraps around {lhs.dtype} (or never stops) "
                       "before the compare fails")
    return TripCount(n, "condition", f"{what} counts {rule}: {n} trips")


def _is_bound_elem(module: Module, body: Computation, lhs: object, rhs: object) -> bool:
    """Both sides are state elements and ``lhs`` is the one the body leaves unchanged."""
    if not (isinstance(lhs, _Elem) and isinstance(rhs, _Elem)):
        return False
    try:
        return _update(module, body, lhs) == lhs and _update(module, body, rhs) != rhs
    except _Unknown:
        return False


def _bound(module: Module, caller: Computation, inst: Instruction, body: Computation,
           rhs: object) -> int:
    """The constant the counter is compared against: in the condition, or a state element
    the body passes through unchanged with a constant initial value."""
    if isinstance(rhs, _Const):
        if int_range(rhs.dtype) is None:
            raise _Unknown(f"the bound {rhs.value} is {rhs.dtype}, not an integer")
        return int(rhs.value)
    if isinstance(rhs, _Elem):
        try:
            same = _update(module, body, rhs) == rhs
        except _Unknown:
            same = False
        if not same:
            raise _Unknown(f"the bound (state element {rhs.index}) changes in the body")
        return _init(module, caller, inst, rhs.index, f"bound (state element {rhs.index})")
    raise _Unknown("the bound is computed, not a constant")
