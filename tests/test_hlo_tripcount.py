"""Trip counts of ``while`` loops without ``known_trip_count``, derived from the condition.

Oracles: XLA's own trip-count annotator (real XLA:CPU dumps from sample_traces/hlo/make_while.py
and make_hlo.py: strip ``known_trip_count``, re-derive, compare), a step-by-step simulation of
the loop with wrapping integer adds, and constructed HLO text and protos with known answers.
"""

from __future__ import annotations

import operator
import re
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import CPU_TRACE, real_trace
from tests.hlo_build import ModuleBuilder, shape
from parsers.hlo.dump import _as_hlo_proto, load_dump
from tracelens.hlo.lens import analyze_module
from parsers.hlo.proto import module_from_proto
from parsers.hlo.schema import hlo_proto_class
from parsers.hlo.text import parse_module
from tracelens.hlo.tripcount import count, derive, int_range
from tracelens.loading.loader import load

HLO = Path(__file__).resolve().parents[1] / "sample_traces" / "hlo"
WHILES = HLO / "module_0004.while_loops.after_optimizations"
DATA_BOUND = HLO / "module_0010.data_bound.after_optimizations"
LOOP = HLO / "module_0024.loop_step.after_optimizations.txt"
OPS = {"LT": operator.lt, "LE": operator.le, "GT": operator.gt, "GE": operator.ge,
       "NE": operator.ne, "EQ": operator.eq}


def _whiles(module):
    return [(c, i) for c in module.computations.values() for i in c.instructions.values()
            if i.opcode == "while"]


def _stripped_proto(path: Path) -> bytes:
    """The serialized module with every while's backend config removed."""
    proto = hlo_proto_class()()
    proto.ParseFromString(_as_hlo_proto(path.read_bytes()))
    for comp in proto.hlo_module.computations:
        for ins in comp.instructions:
            if ins.opcode == "while":
                ins.ClearField("backend_config")
    return proto.SerializeToString()


# -- real XLA:CPU loops: XLA's known_trip_count is the oracle ----------------------------------

@pytest.mark.parametrize("suffix", ["txt", "hlo.pb"])
def test_stripped_real_loops_recover_xlas_trip_counts(suffix):
    """Five lax.while_loops, one per direction (LT, LE, GT, GE, NE) and step sign."""
    module, _ = load_dump(Path(f"{WHILES}.{suffix}"))
    loops = _whiles(module)
    expected = {i.name: i.backend_config["known_trip_count"]["n"] for _, i in loops}
    assert sorted(expected.values()) == ["3", "3", "4", "4", "5"]
    got = {}
    for comp, inst in loops:
        trips = derive(module, comp, replace(inst, backend_config_text=""))
        assert trips.source == "condition", trips.note
        got[inst.name] = str(trips.n)
    assert got == expected


def test_stripped_real_proto_loops_through_the_lens():
    """The proto path end to end: literals (field 8) and directions (field 63) decoded."""
    module = module_from_proto(_stripped_proto(Path(f"{WHILES}.hlo.pb")))
    assert all(i.backend_config_text == "" for _, i in _whiles(module))
    notes = analyze_module(module, None).notes
    assert len(notes) == 5 and all("from its condition" in n for n in notes)
    assert "state element 0 counts from 10 by -3 while > 0: 4 trips" in " ".join(notes)


def test_loop_step_without_known_trip_count_keeps_its_four_trips():
    text = LOOP.read_text()
    stripped, n = re.subn(r', backend_config=\{"known_trip_count"[^\n]*', "", text)
    assert n == 1
    lens = analyze_module(parse_module(stripped, program_id=24), None)
    (c,) = lens.collectives
    assert (c.loop, c.trip_count, c.executions_per_step, c.bytes_per_step) == (
        "while.15", 4, 4, 4 * 256 * 128 * 4)
    assert lens.notes == ("loop while.15 has no known_trip_count; from its condition: state "
                          "element 0 counts from 0 by 1 while < 4: 4 trips",)
    assert [f.kind for f in lens.findings] == ["collective-in-loop"]
    # with the annotation the lens says nothing extra
    assert analyze_module(parse_module(text, program_id=24), None).notes == ()


@pytest.mark.parametrize("trace", ["cpu", "planted"])
def test_trace_embedded_loops_recover_their_counts(trace):
    """Every while of every HloProto embedded in the real XLA:CPU traces (jax.random's
    threefry loop, the planted gradient-accumulation loop), stripped and re-derived."""
    path = real_trace(CPU_TRACE) if trace == "cpu" else HLO / "planted.xplane.pb"
    modules = load([path]).modules
    rows = modules.filter(pl.col("hlo_proto").is_not_null()).unique("program_id").sort(
        "program_id").select("program_id", "hlo_proto").rows()
    got = []
    for pid, blob in rows:
        module = module_from_proto(blob, program_id=pid)
        for comp, inst in _whiles(module):
            trips = derive(module, comp, replace(inst, backend_config_text=""))
            got.append((pid, inst.name, trips.n == derive(module, comp, inst).n, trips.n))
    assert got == ([(4, "while.24", True, 5), (6, "while.24", True, 5), (8, "while.24", True, 5)]
                   if trace == "cpu" else [(4, "while.24", True, 5), (24, "while.15", True, 4)])


@pytest.mark.parametrize("suffix", ["txt", "hlo.pb"])
def test_real_data_dependent_bound_stays_unknown(suffix):
    """lax.while_loop(i < n) with n an argument: XLA writes no known_trip_count, neither do we."""
    module, _ = load_dump(Path(f"{DATA_BOUND}.{suffix}"))
    ((comp, inst),) = _whiles(module)
    assert "known_trip_count" not in inst.backend_config
    trips = derive(module, comp, inst)
    assert trips.n is None and trips.source == ""
    assert trips.note == ("the initial bound (state element 2) is not a constant: it is "
                          "parameter 1 of main.0_spmd (data-dependent)")
    lens = analyze_module(module, None)
    (c,) = lens.collectives
    assert c.in_loop and c.trip_count is None and c.executions_per_step is None
    assert c.bytes_per_step is None and "data-dependent" in c.trip_note
    (f,) = lens.findings
    assert f.kind == "collective-in-loop" and f.bytes_per_step is None
    assert f.message == ("psum.6 (all-reduce, 256 B) runs inside loop while.9 of unknown trip "
                         "count (the initial bound (state element 2) is not a constant: it is "
                         "parameter 1 of main.0_spmd (data-dependent)): its bytes per step are "
                         "unknown")
    assert lens.notes == ("loop while.9 has no known_trip_count; its trip count is unknown: "
                          + trips.note,)


# -- the count itself against a simulation ---------------------------------------------------

def _simulate(init, step, direction, bound, lo, hi, limit=600):
    """(trips, wrapped): the loop run with wrapping adds; trips None when it never ends."""
    i, trips, wrapped = init, 0, False
    while OPS[direction](i, bound):
        if trips >= limit:  # more than 256 distinct values: it cycles
            return None, True
        i += step
        if not lo <= i <= hi:
            wrapped, i = True, (i - lo) % (hi - lo + 1) + lo
        trips += 1
    return trips, wrapped


@pytest.mark.parametrize("dtype", ["s8", "u8"])
def test_count_matches_a_simulation_and_is_unknown_only_when_the_counter_wraps(dtype):
    lo, hi = int_range(dtype)
    steps = [-128, -50, -7, -3, -2, -1, 0, 1, 2, 3, 7, 50, 127]
    checked = exact = 0
    for direction in OPS:
        for init in range(lo, hi + 1, 17):
            for step in steps:
                for bound in range(lo - 12, hi + 13, 23):
                    trips, wrapped = _simulate(init, step, direction, bound, lo, hi)
                    got = count(init, step, direction, bound, lo, hi)
                    checked += 1
                    if not wrapped:
                        assert got == trips, (init, step, direction, bound)
                        exact += 1
                    else:  # exact when known, never a guess
                        assert got is None or got == trips, (init, step, direction, bound)
    assert checked > 10000 and exact > checked // 3


def test_count_formulas_by_hand():
    big = int_range("s32")
    assert count(0, 1, "LT", 4, *big) == 4
    assert count(0, 3, "LT", 10, *big) == 4       # ceil(10 / 3)
    assert count(0, 3, "LE", 9, *big) == 4        # 0 3 6 9
    assert count(5, 1, "LT", 5, *big) == 0        # never runs
    assert count(9, -2, "GE", 0, *big) == 5       # 9 7 5 3 1
    assert count(0, 4, "NE", 12, *big) == 3
    assert count(0, 4, "NE", 10, *big) is None    # steps over the bound: wraps
    assert count(0, -1, "LT", 4, *big) is None    # moves away from the bound
    assert count(0, 0, "LT", 4, *big) is None     # never moves
    assert count(2, 5, "EQ", 2, *big) == 1
    assert count(0, 1, "LT", 1 << 31, *big) is None  # the bound is past the type's max


# -- constructed HLO text ----------------------------------------------------------------------

_ADD = ("HloModule m\n\n%add (x: f32[], y: f32[]) -> f32[] {\n  %x = f32[] parameter(0)\n"
        "  %y = f32[] parameter(1)\n  ROOT %s = f32[] add(%x, %y)\n}\n\n")


def _loop(init="constant(0)", step="add(%i, %k)", k="constant(1)", cond="compare(%i, %n)",
          direction="LT", bound="constant(4)", t="s32", fused=False) -> str:
    """A while over (counter, f32[8]) with an all-reduce in the body. The pieces are HLO
    expressions; ``fused`` puts the compare and the update in fusions (as XLA:CPU does)."""
    state = f"({t}[], f32[8])"
    cond_lines = (f"  %c = {state} parameter(0)\n  %i = {t}[] get-tuple-element(%c), index=0\n"
                  f"  %n = {t}[] {bound}\n")
    if fused:
        head = (f"%cmp_f (a: {t}[], b: {t}[]) -> pred[] {{\n  %a = {t}[] parameter(0)\n"
                f"  %b = {t}[] parameter(1)\n  ROOT %r = pred[] "
                f"{cond.replace('%i', '%a').replace('%n', '%b')}, direction={direction}\n}}\n\n"
                f"%add_f (a: {t}[], b: {t}[]) -> {t}[] {{\n  %a = {t}[] parameter(0)\n"
                f"  %b = {t}[] parameter(1)\n  ROOT %r = {t}[] "
                f"{step.replace('%i', '%a').replace('%k', '%b')}\n}}\n\n")
        cond_root = "fusion(%i, %n), kind=kLoop, calls=%cmp_f"
        next_line = f"  %i2 = {t}[] copy(%i)\n  %next = {t}[] fusion(%i2, %k), kind=kLoop, " \
                    "calls=%add_f\n"
    else:
        head = ""
        cond_root = f"{cond}, direction={direction}"
        next_line = f"  %next = {t}[] {step}\n"
    return (_ADD + head + f"%cond (c: {state}) -> pred[] {{\n{cond_lines}"
            f"  ROOT %lt = pred[] {cond_root}\n}}\n\n"
            f"%body (b: {state}) -> {state} {{\n  %b = {state} parameter(0)\n"
            f"  %i = {t}[] get-tuple-element(%b), index=0\n  %k = {t}[] {k}\n{next_line}"
            "  %v = f32[8]{0} get-tuple-element(%b), index=1\n"
            "  %ar = f32[8]{0} all-reduce(%v), channel_id=1, replica_groups={{0,1}}, "
            "use_global_device_ids=true, to_apply=%add\n"
            f"  ROOT %t = {state} tuple(%next, %ar)\n}}\n\n"
            f"ENTRY %main (x: f32[8], q: {t}[]) -> {state} {{\n  %x = f32[8]{{0}} parameter(0)\n"
            f"  %q = {t}[] parameter(1)\n  %i0 = {t}[] {init}\n  %i1 = {t}[] copy(%i0)\n"
            f"  %p = {state} tuple(%i1, %x)\n"
            f"  ROOT %w = {state} while(%p), condition=%cond, body=%body\n}}\n")


def _trips(text: str):
    module = parse_module(text, program_id=1)
    ((comp, inst),) = _whiles(module)
    return derive(module, comp, inst)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("direction,init,step,k,bound,n", [
    ("LT", 0, "add(%i, %k)", 1, 4, 4),
    ("LT", 1, "add(%k, %i)", 3, 11, 4),          # 1 4 7 10: the constant first
    ("LE", 1, "add(%i, %k)", 3, 10, 4),          # 1 4 7 10
    ("GT", 10, "subtract(%i, %k)", 3, 0, 4),     # 10 7 4 1
    ("GE", 10, "add(%i, %k)", -3, 1, 4),         # 10 7 4 1
    ("NE", 0, "add(%i, %k)", 5, 20, 4),
    ("EQ", 7, "add(%i, %k)", 1, 7, 1),
    ("LT", 9, "add(%i, %k)", 1, 4, 0),           # never runs
])
def test_each_direction_and_step_sign(direction, init, step, k, bound, n, fused):
    trips = _trips(_loop(init=f"constant({init})", step=step, k=f"constant({k})",
                         direction=direction, bound=f"constant({bound})", fused=fused))
    assert (trips.n, trips.source) == (n, "condition"), trips.note


def test_swapped_operands_flip_the_direction():
    # 4 > i  is  i < 4
    trips = _trips(_loop(cond="compare(%n, %i)", direction="GT"))
    assert trips.n == 4 and "while < 4" in trips.note


def test_widening_convert_is_followed_and_wrapping_is_unknown():
    text = _loop(t="s8", cond="compare(%wide, %n)", bound="constant(100)")
    text = text.replace("  %n = s8[] constant(100)\n",
                        "  %wide = s32[] convert(%i)\n  %n = s32[] constant(100)\n")
    assert _trips(text).n == 100
    # the s8 counter wraps at 127 long before it reaches 200: the loop never ends that way
    wraps = _trips(text.replace("constant(100)", "constant(200)"))
    assert wraps.n is None and "wraps around s8" in wraps.note


def test_bound_as_an_unchanged_state_element_with_a_constant_init():
    text = _loop().replace("(s32[], f32[8])", "(s32[], f32[8], s32[])")
    text = text.replace("  %n = s32[] constant(4)\n",
                        "  %n = s32[] get-tuple-element(%c), index=2\n")
    text = text.replace("  ROOT %t = (s32[], f32[8], s32[]) tuple(%next, %ar)",
                        "  %m = s32[] get-tuple-element(%b), index=2\n"
                        "  ROOT %t = (s32[], f32[8], s32[]) tuple(%next, %ar, %m)")
    const = text.replace("tuple(%i1, %x)", "tuple(%i1, %x, %i5)").replace(
        "  %p = ", "  %i5 = s32[] constant(6)\n  %p = ")
    assert _trips(const).n == 6
    data = text.replace("tuple(%i1, %x)", "tuple(%i1, %x, %q)")
    trips = _trips(data)
    assert trips.n is None and "parameter 1 of main (data-dependent)" in trips.note


@pytest.mark.parametrize("change,why", [
    ({"init": "add(%q, %q)"}, "the initial counter (state element 0) is not a constant"),
    ({"init": "copy(%q)"}, "parameter 1 of main (data-dependent)"),
    ({"step": "multiply(%i, %k)", "k": "constant(2)"}, "not the counter plus or minus"),
    ({"step": "subtract(%k, %i)"}, "not the counter plus or minus"),
    ({"k": "copy(%i)"}, "not the counter plus or minus"),
    ({"t": "f32", "init": "constant(0)"}, "compares f32 values"),
    ({"bound": "sqrt(%i)"}, "sqrt"),
    ({"k": "constant(0)"}, "wraps around s32 (or never stops)"),
    ({"direction": "GT", "init": "constant(9)"}, "wraps around"),
])
def test_unknown_stays_unknown_with_its_reason(change, why):
    trips = _trips(_loop(**change))
    assert trips.n is None and trips.source == "" and why in trips.note, trips.note


def test_data_dependent_condition_and_unsigned_compare_of_signed_values():
    both = _loop().replace(
        "  ROOT %lt = pred[] compare(%i, %n), direction=LT",
        "  %a = pred[] compare(%i, %n), direction=LT\n  %z = f32[8]{0} get-tuple-element(%c), "
        "index=1\n  %e = pred[] constant(true)\n  ROOT %lt = pred[] and(%a, %e)")
    trips = _trips(both)
    assert trips.n is None and "lt is a and" in trips.note
    mixed = _trips(_loop().replace("direction=LT", "direction=LT, type=UNSIGNED"))
    assert mixed.n is None and "as UNSIGNED" in mixed.note


def test_scalar_state_loop():
    text = _ADD + (
        "%cond (c: s32[]) -> pred[] {\n  %c = s32[] parameter(0)\n  %n = s32[] constant(3)\n"
        "  ROOT %lt = pred[] compare(%c, %n), direction=LT\n}\n\n"
        "%body (b: s32[]) -> s32[] {\n  %b = s32[] parameter(0)\n  %k = s32[] constant(1)\n"
        "  ROOT %next = s32[] add(%b, %k)\n}\n\n"
        "ENTRY %main () -> s32[] {\n  %z = s32[] constant(-2)\n"
        "  ROOT %w = s32[] while(%z), condition=%cond, body=%body\n}\n")
    trips = _trips(text)
    assert trips.n == 5 and trips.note == "the state counts from -2 by 1 while < 3: 5 trips"


def test_text_scalar_literals():
    m = parse_module(_ADD + "ENTRY %e () -> f32[] {\n  %a = s32[] constant(-3)\n"
                     "  %b = pred[] constant(true)\n  %c = f32[] constant(-inf)\n"
                     "  %d = s32[2]{0} constant({1, 2})\n"
                     "  %f = u64[] constant(18446744073709551615)\n"
                     "  ROOT %g = f32[] constant(0.0025)\n}\n")
    got = {n: i.literal for n, i in m.entry_computation.instructions.items()}
    assert got == {"a": -3, "b": True, "c": float("-inf"), "d": None,
                   "f": (1 << 64) - 1, "g": 0.0025}


# -- constructed protos: each literal encoding ---------------------------------------------------

def _set_literal(dtype: str, value: int):
    def fill(lit):
        shape(lit.shape, f"{dtype}[]")
        if dtype in ("s32", "s64", "u32", "u64"):
            getattr(lit, f"{dtype}s").append(value)
        else:
            width = {"s8": 1, "u8": 1, "s16": 2, "u16": 2}[dtype]
            setattr(lit, f"{dtype}s", value.to_bytes(width, "little", signed=dtype[0] == "s"))
    return fill


@pytest.mark.parametrize("dtype", ["s8", "u8", "s16", "u16", "s32", "s64", "u32", "u64"])
def test_proto_literals_of_each_integer_type(dtype):
    """Counts from 10 by -2 while > 0 (the counter state first, written in the proto order:
    body before condition in called_computation_ids)."""
    b = ModuleBuilder("m", 7)
    st = (f"{dtype}[]", "f32[8]")
    cond = b.computation("cond")
    b.inst(cond, "c", "parameter", st)
    b.inst(cond, "i", "get-tuple-element", f"{dtype}[]", ("c",))
    b.inst(cond, "n", "constant", f"{dtype}[]", literal=_set_literal(dtype, 0))
    b.inst(cond, "gt", "compare", "pred[]", ("i", "n"), root=True, comparison_direction="GT")
    body = b.computation("body")
    b.inst(body, "p", "parameter", st)
    b.inst(body, "i", "get-tuple-element", f"{dtype}[]", ("p",))
    b.inst(body, "v", "get-tuple-element", "f32[8]", ("p",), tuple_index=1)
    b.inst(body, "k", "constant", f"{dtype}[]", literal=_set_literal(dtype, 2))
    b.inst(body, "next", "subtract", f"{dtype}[]", ("i", "k"))
    b.inst(body, "t", "tuple", st, ("next", "v"), root=True)
    main = b.computation("main")
    b.inst(main, "x", "parameter", "f32[8]")
    b.inst(main, "i0", "constant", f"{dtype}[]", literal=_set_literal(dtype, 10))
    b.inst(main, "s", "tuple", st, ("i0", "x"))
    b.inst(main, "w", "while", st, ("s",), calls=("body", "cond"), root=True)
    b.entry(main)
    module = module_from_proto(b.bytes())
    assert module.computations["body"].instructions["k"].literal == 2
    ((comp, inst),) = _whiles(module)
    trips = derive(module, comp, inst)
    assert (trips.n, trips.note) == (5, "state element 0 counts from 10 by -2 while > 0: 5 trips")


def test_hostile_loops_end_unknown_without_hanging():
    """Cycles through copies (init and update), a literal outside its type, a literal too long
    to be a number: each ends as unknown with a reason, never a count or a hang."""
    cyclic_init = _loop().replace(
        "  %p = (s32[], f32[8]) tuple(%i1, %x)\n",
        "  %p = (s32[], f32[8]) copy(%p2)\n  %p2 = (s32[], f32[8]) copy(%p)\n")
    assert "not a tuple" in _trips(cyclic_init).note
    cyclic_update = _loop(step="add(%j, %k)").replace(
        "  %next = s32[] add(%j, %k)\n",
        "  %next = s32[] add(%j, %k)\n  %j = s32[] copy(%j2)\n  %j2 = s32[] copy(%j)\n")
    assert "instructions deep" in _trips(cyclic_update).note
    outside = _trips(_loop(bound="constant(4294967296)"))
    assert outside.n is None and "outside s32" in outside.note
    huge = _trips(_loop(bound="constant(" + "9" * 5000 + ")"))
    assert huge.n is None and "not a decoded scalar" in huge.note


def test_an_unknown_outer_loop_is_named_in_the_inner_collectives_reason():
    inner = _loop().replace("%cond", "%icond").replace("%body", "%ibody").replace(
        "condition=%icond, body=%ibody", 'condition=%icond, body=%ibody, '
        'backend_config={"known_trip_count":{"n":"4"}}')
    # the entry of _loop becomes the outer body: (s32[], f32[8]) in, its while's state out
    inner = inner.replace("ENTRY %main (x: f32[8], q: s32[]) -> (s32[], f32[8]) {\n"
                          "  %x = f32[8]{0} parameter(0)\n  %q = s32[] parameter(1)\n",
                          "%obody (o: (s32[], f32[8])) -> (s32[], f32[8]) {\n"
                          "  %o = (s32[], f32[8]) parameter(0)\n"
                          "  %x = f32[8]{0} get-tuple-element(%o), index=1\n")
    text = inner + (
        "\n%ocond (c: (s32[], f32[8])) -> pred[] {\n  %c = (s32[], f32[8]) parameter(0)\n"
        "  %v = f32[8]{0} get-tuple-element(%c), index=1\n  %r = f32[] reduce(%v, %z), "
        "dimensions={0}, to_apply=%add\n  %z = f32[] constant(0)\n"
        "  ROOT %gt = pred[] compare(%r, %z), direction=GT\n}\n\n"
        "ENTRY %main (x: f32[8]) -> (s32[], f32[8]) {\n  %x = f32[8]{0} parameter(0)\n"
        "  %k = s32[] constant(0)\n  %s = (s32[], f32[8]) tuple(%k, %x)\n"
        "  ROOT %w1 = (s32[], f32[8]) while(%s), condition=%ocond, body=%obody\n}\n")
    lens = analyze_module(parse_module(text, program_id=5), None)
    (c,) = lens.collectives
    assert (c.loop, c.trip_count, c.executions_per_step) == ("w", None, None)
    assert c.trip_note.startswith("w1: the condition ocond is not a compare")
    assert "of unknown trip count (w1: the condition ocond" in lens.findings[0].message
    assert len(lens.notes) == 1 and lens.notes[0].startswith("loop w1 has no known_trip_count")
