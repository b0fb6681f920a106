"""The Kineto reader's fast passes: the garbage collector paused during the bulk decode, the
selection counted from one (cat, ph) histogram, launch shapes checked once per distinct one.

Each fast form must count, keep and spell exactly what the value-by-value form does; the
outputs are pinned by the golden fixtures, these tests pin the forms against their references.
"""

from __future__ import annotations

import gc
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers.kineto import checks, reader, typed
from tests.conftest import SHARED
from tests.test_kineto_typed import _event, _write
from tracelens.core.errors import TraceInputError

XDIT = SHARED / "traces" / "kineto" / "mi300x_inference" / "xdit_flux1_aiter_sage_rank0.json.gz"


def _spy_gc(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """``gc.isenabled()`` each time a chunk's events are selected (either path)."""
    seen: list[bool] = []

    def spied(orig: Any) -> Any:
        def spy(*a: object, **k: object) -> Any:
            seen.append(gc.isenabled())
            return orig(*a, **k)
        return spy
    for name in ("selected", "selected_structs"):
        monkeypatch.setattr(checks, name, spied(getattr(checks, name)))
    return seen


@pytest.mark.skipif(not XDIT.exists(), reason="needs ../shared")
def test_gc_is_paused_during_the_bulk_decode_and_back_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """229k events: the collector would scan the live chunk again and again for nothing."""
    assert gc.isenabled()
    seen = _spy_gc(monkeypatch)
    monkeypatch.setattr(typed, "CHUNK", 1 << 16)
    trace = reader.read(XDIT)
    assert trace.events.height and len(seen) > 1
    assert not any(seen)
    assert gc.isenabled()


def test_gc_is_back_after_an_error_and_stays_off_if_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy_gc(monkeypatch)
    bad = _write(tmp_path, "b.json.gz", [_event(cat="cpu_op", name="op")])  # no device activity
    good = _write(tmp_path, "g.json.gz", [_event()])
    with pytest.raises(TraceInputError):
        reader.read(tmp_path / "missing.json")
    with pytest.raises(TraceInputError):
        (tmp_path / "t.json").write_bytes(b'{"traceEvents": [')
        reader.read(tmp_path / "t.json")
    assert gc.isenabled()
    reader.read(bad)
    assert gc.isenabled() and seen == [False]
    gc.disable()
    try:
        reader.read(good)
        assert not gc.isenabled()  # a caller that paused it keeps it paused
    finally:
        gc.enable()


VALUES = st.sampled_from([None, "X", "x", "i", "kernel", "cpu_op", "gpu_memcpy", "ac2g", "",
                          1, True, 0, False, 1.0, 2.5, "1", "fwdbwd", "Trace"])
ODD = st.one_of(VALUES, st.just([1]), st.just({"a": 1}))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(VALUES, VALUES), max_size=40), st.booleans(),
       st.lists(st.tuples(ODD, ODD), max_size=3))
def test_selection_counts_as_the_value_by_value_form(pairs: list, dicts: bool,
                                                     odd: list) -> None:
    """Counter keys merge 1, True and 1.0: never a string with anything else, so every
    count and every kept event is the reference's; unhashable values take the reference."""
    for extra in ([], odd):
        rows = pairs + extra
        evs = ([{"cat": c, "ph": p} for c, p in rows] if dicts else
               [SimpleNamespace(cat=c, ph=p) for c, p in rows])
        wanted = frozenset(reader._WANTED)
        got, want = Counter(), Counter()
        kept = checks.selected(evs, dicts, wanted, reader._DEVICE, got)
        ref = checks._odd_pairs(evs, [c for c, _ in rows], [p for _, p in rows], wanted,
                                reader._DEVICE, want)
        assert [id(e) for e in kept] == [id(e) for e in ref]
        assert +got == +want


def test_launch_shapes_of_equal_values_of_other_types_are_not_merged() -> None:
    """Each distinct shape is checked once: 1, True and 1.0 are equal and hash alike, but
    only 1 is a launch-shape integer; an integer too long to print still gets its row."""
    huge = 10 ** 5000
    quads = [([1, 1, 1], [64, 1, 1], 1, 1), ([True, 1, 1], [64, 1, 1], True, 1.0),
             ([1.0, 1, 1], [64, 1, 1], 1, 1), ([1, 1, 1], [64, 1, 1], 1, 1),
             ([True, 1, 1], [64, 1, 1], True, 1.0), (None, None, None, None)]
    full = "grid=1,1,1 block=64,1,1 regs=1 shared=1"
    want = [full, "block=64,1,1", "block=64,1,1 regs=1 shared=1", full, "block=64,1,1"]
    shape, bad = reader._launch(*map(list, zip(*quads)))
    assert shape.to_list() == want[:5] + [None]
    assert bad.to_list() == [False, True, True, False, True, False]
    shape, bad = reader._launch([[huge, 1, 1]], [[2, 1, 1]], [huge], [8])
    assert shape.to_list() == ["block=2,1,1 shared=8"]
    assert bad.to_list() == [True]
    deep: list = []
    for _ in range(5000):  # deeper than the JSON encoder goes
        deep = [deep]
    shape, bad = reader._launch([deep], [[2, 1, 1]], [None], [None])
    assert shape.to_list() == ["block=2,1,1"] and bad.to_list() == [True]
    shape, bad = reader._launch([], [], [], [])
    assert shape.dtype == pl.String and bad.dtype == pl.Boolean and not shape.len()


def test_device_args_are_counted_on_device_activity_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """device, stream and bytes are taken on device rows only: ROCm's runtime calls write
    ``stream: "0x0"`` and ``bytes: "256"`` (never read, never counted); a kernel's string
    stream is read as unknown and counted, on both paths and across chunks."""
    runtime = {"device": "0", "stream": "0x0", "bytes": "256", "correlation": 1}
    events = [_event(cat="cuda_runtime", name="hipLaunchKernel", ts=9.0, args=runtime),
              _event(args={"device": 0, "stream": "7", "correlation": 1}),
              _event(cat="cuda_runtime", name="hipMemcpy", ts=19.0,
                     args={**runtime, "correlation": 2}),
              _event(cat="gpu_memcpy", name="Memcpy HtoD", ts=20.0,
                     args={"device": 0, "stream": 7, "bytes": 2.5, "correlation": 2})] * 3
    path = _write(tmp_path, "r.json.gz", events)
    monkeypatch.setattr(typed, "CHUNK", 3)
    for decode in (typed.decode, None):
        if decode is None:  # the tolerant path
            def refuse(raw: bytes) -> None:
                raise reader.msgspec.ValidationError("forced")
            monkeypatch.setattr(typed, "decode", refuse)
        trace = reader.read(path)
        assert [w for w in trace.meta.warnings if "wrong type" in w] == [
            "r.json.gz: 6 values of the wrong type read as unknown (by field: args.bytes 3, "
            "args.stream 3)"]
        assert trace.events.height == 2  # each written three times: counted once
        assert trace.events.filter(trace.events["kind"] == "memcpy")["bytes"].null_count() == 1


PHASES = st.sampled_from(["X", "X", "X", "i", "s", "f", "M", "B", "("])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(VALUES, PHASES, st.booleans()), max_size=40),
       st.lists(st.tuples(ODD, PHASES), max_size=3))
def test_struct_selection_counts_as_the_value_by_value_form(rows: list, odd: list) -> None:
    """Events decoded as the union tagged by ph are kept and counted as the value-by-value
    form keeps and counts the same events parsed as dicts (a missing cat as None)."""
    for extra in ([], [(c, p, True) for c, p in odd]):
        evs = [{"ph": p, **({"cat": c} if has or c is not None else {})}
               for c, p, has in rows + extra]
        text = typed.orjson.dumps(evs)
        wanted = frozenset(reader._WANTED)
        want: Counter = Counter()
        ref = checks._odd_pairs(evs, [e.get("cat") for e in evs], [e["ph"] for e in evs],
                                wanted, reader._DEVICE, want)
        # the general union, and the quiet one where it takes the document (the other
        # phases' categories are unused ones or absent: their events count for nothing)
        decoded = [(typed._EVENTS.decode(text), typed.Complete)]
        try:
            decoded.append((typed._QUIET_EVENTS.decode(text), None))
        except typed.msgspec.ValidationError:
            assert any(e["ph"] != "X" and e.get("cat") not in (None, *typed.OTHER_CATS)
                       for e in evs)
        for structs, complete in decoded:
            got: Counter = Counter()
            kept, at, cats = checks.selected_structs(structs, complete, typed.PHASE_OF,
                                                     wanted, reader._DEVICE, got)
            assert [id(structs[i]) for i in at] == [id(e) for e in kept]
            assert cats.to_list() == [e["cat"] for e in ref] and len(at) == len(ref)
            assert +got == +want


def test_quiet_categories_are_unused_ones() -> None:
    """An event of another phase with one of these categories counts for nothing only
    because none of them is a category the reader uses."""
    assert not set(typed.OTHER_CATS) & set(reader._WANTED)
    assert typed.OTHER_CAT in typed.OTHER_CATS


def _typed_reference(values: list, dtype: object, counted: list | None) -> tuple[list, int]:
    """typed_series value by value: only the accepted types, bool never a number."""
    takes = {pl.String: (str,), pl.Int64: (int,), pl.Float64: (int, float)}[dtype]
    ok = [v if type(v) in takes and (dtype != pl.Int64 or -(1 << 63) <= v < 1 << 63) else None
          for v in values]
    if dtype == pl.Float64:
        ok = [None if v is None else float(v) for v in ok]
    bad = sum(1 for i, (v, o) in enumerate(zip(values, ok))
              if o is None and v is not None and (counted is None or counted[i]))
    return ok, bad


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
                    st.sampled_from([0, 1, -1, 0.0, 1.0, -0.0, 2.5, 1e300, "1", "", "a"]),
                    st.floats(allow_nan=False), st.just([1]), st.just({"a": 1}))


@settings(max_examples=400, deadline=None)
@given(st.lists(SCALARS, max_size=30), st.sampled_from(["String", "Int64", "Float64"]),
       st.booleans())
def test_typed_series_fast_form_is_the_value_by_value_form(values: list, dtype: str,
                                                           with_counted: bool) -> None:
    """The strict constructor is tried on every column: it refuses every type a column does
    not take but reads a bool as a number, which the 0/1 rows are checked for."""
    dt = getattr(pl, dtype)
    counted = [i % 2 == 0 for i in range(len(values))] if with_counted else None
    lost: Counter = Counter()
    got = checks.typed_series(values, dt, "f", lost, counted)
    want, bad = _typed_reference(values, dt, counted)
    assert got.dtype == dt
    assert got.to_list() == want
    assert lost["f"] == bad


def test_rare_args_are_the_tolerant_path_values() -> None:
    """The collective and shape args, decoded again from each event's raw JSON for the rows
    that read them, are what the tolerant path's dicts hold (absent or null args: None)."""
    evs = [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "args": {
               "Collective name": "allreduce", "In msg nelems": 1 << 70, "dtype": "Float",
               "Process Group Ranks": [0, 1], "Group size": 2, "External id": 1}},
           {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "args": {
               "Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"],
               "Concrete Inputs": ["", ""]}},
           {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "args": None},
           {"ph": "X", "cat": "cpu_op", "name": "aten::mm"},
           {"ph": "X", "name": "x", "args": {"dtype": None, "Process Group Name": {"a": [1]}}}]
    text = json.dumps({"traceEvents": evs}).encode()  # exact big integers
    raws, _ = typed.decode(text)
    keys = tuple(typed.RARE_ATTRS)
    assert raws is not None
    got = typed.rare(raws, keys)
    for k, col in zip(keys, got):
        assert col == [(e.get("args") or {}).get(k) for e in evs], k
    assert typed.rare([], keys) == [[] for _ in keys]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3)), max_size=30))
def test_first_row_by_key_is_the_sorted_unique_one(rows: list) -> None:
    """The launch and op of an id: its earliest row (start, then file order) whether ids
    repeat (then sorted) or not (then taken as they are)."""
    from parsers.kineto.link import _first_by_key
    df = pl.DataFrame({"id": [k for k, _ in rows], "start_ns": [t for _, t in rows],
                       "name": [f"n{i}" for i in range(len(rows))]},
                      schema={"id": pl.Int64, "start_ns": pl.Int64, "name": pl.String})
    df = df.with_columns(_row=pl.int_range(pl.len(), dtype=pl.Int64))
    got = _first_by_key(df.lazy(), "id", ["start_ns", "name"]).sort("id")
    want = (df.sort("start_ns", "_row").unique("id", keep="first", maintain_order=True)
            .select("id", "start_ns", "name").sort("id"))
    assert got.equals(want)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["k1", "k2"]), st.integers(0, 1), st.integers(0, 2),
                          st.sampled_from([None, 5])), max_size=12))
def test_device_activity_written_twice_is_kept_once(rows: list) -> None:
    """Rows that agree on device, stream and times are compared as a whole (a copy is kept
    once, a different kernel at the same time is kept); rows that do not are not compared."""
    from tracelens.core.model import TraceMeta
    dev = pl.DataFrame(
        {"kind": ["kernel"] * len(rows), "name": [r[0] for r in rows], "device": [0] * len(rows),
         "stream": [r[1] for r in rows], "start_ns": [r[2] for r in rows],
         "end_ns": [r[2] + 1 for r in rows], "correlation": [r[3] for r in rows],
         "External id": [None] * len(rows), "bytes": [None] * len(rows),
         "_shape": [None] * len(rows)},
        schema={"kind": pl.String, "name": pl.String, "device": pl.Int32, "stream": pl.Int64,
                "start_ns": pl.Int64, "end_ns": pl.Int64, "correlation": pl.Int64,
                "External id": pl.Int64, "bytes": pl.Int64, "_shape": pl.String})
    meta = TraceMeta()
    got = reader._usable(Path("t.json"), dev, meta)
    want = dev.unique(subset=list(reader._SAME), keep="first", maintain_order=True)
    assert got.equals(want)
    assert len(meta.warnings) == (want.height != dev.height)


def test_complete_events_read_as_tuples_in_column_order() -> None:
    """The typed path reads a kept event's fields with one ``astuple`` (slots in order):
    the struct's fields must be the base columns, then args."""
    assert typed.Complete.__struct_fields__ == (*reader._BASE, "args")
    for key, attr in typed.ARG_ATTRS.items():
        assert typed.Args.__struct_fields__[reader._ARG_AT[key]] == attr


def test_pinned_events_hold_no_raw_json() -> None:
    """typed.chunks keeps one event in PIN of every chunk alive to the end; a msgspec.Raw in
    such an event would keep its chunk's whole text alive with it (the peak memory)."""
    from msgspec.structs import fields
    for struct in (typed.Complete, typed.Args):
        assert not [f.name for f in fields(struct) if f.type is typed.msgspec.Raw], struct
