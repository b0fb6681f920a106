"""The typed (msgspec) and tolerant (orjson) Kineto decodes give the same trace.

The reader takes the typed path when the document fits its schema and hands anything else to
the tolerant one; both must give identical frames, warnings and errors. Each case says which
path it expects, so a case cannot silently test the tolerant path against itself.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import msgspec
import pytest

from parsers.kineto import reader, typed
from tests.conftest import SHARED
from tracelens.core.errors import TraceInputError
from tracelens.loading.reading import file_stages

KINETO = SHARED / "traces" / "kineto"
REAL = sorted(KINETO.rglob("*.json.gz")) if KINETO.exists() else []


def _read(path: Path, monkeypatch: pytest.MonkeyPatch, tolerant: bool) -> tuple[object, str]:
    """The trace (or the error line) and the path that produced it."""
    used = []
    with monkeypatch.context() as m:
        if tolerant:
            def refuse(raw: bytes) -> None:
                raise msgspec.ValidationError("forced")
            m.setattr(typed, "decode", refuse)
        orig = reader._select_dicts

        def spy(evs: list, lost: object) -> tuple:
            used.append("tolerant")
            return orig(evs, lost)
        m.setattr(reader, "_select_dicts", spy)
        try:
            trace = file_stages(reader.read(path))  # costs and devices, as reading does
        except TraceInputError as exc:
            return str(exc), used[-1] if used else "typed"
    return trace, used[-1] if used else "typed"


def _same(a: object, b: object) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    for name in ("events", "host_events", "steps", "devices"):
        fa, fb = getattr(a, name), getattr(b, name)
        assert fa.schema == fb.schema, name
        assert fa.equals(fb, null_equal=True), name
    assert a.meta.warnings == b.meta.warnings
    assert a.meta.format_facts == b.meta.format_facts and a.meta.member == b.meta.member


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_real_traces_take_the_typed_path_and_match_the_tolerant_one(
        path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, how = _read(path, monkeypatch, tolerant=False)
    assert how == "typed"
    slow, how = _read(path, monkeypatch, tolerant=True)
    assert how == "tolerant"
    _same(fast, slow)


def _event(**kw: object) -> dict:
    ev = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2.25,
          "args": {"device": 0, "stream": 7, "correlation": 1}}
    ev.update(kw)
    return ev


def _job(n: int = 4) -> list[dict]:
    """A launch, a costed op, a collective op and their kernels, ``n`` times."""
    out = []
    for i in range(n):
        t = 100.0 * i
        out += [
            _event(cat="cpu_op", name="aten::mm", ts=t, dur=50.0, args={
                "External id": 10 * i, "Input Dims": [[64, 32], [32, 16]],
                "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}),
            _event(cat="cpu_op", name="record_param_comms", ts=t + 1, dur=40.0, args={
                "External id": 10 * i + 1, "Collective name": "allreduce",
                "In msg nelems": 1024, "Out msg nelems": 1024, "Group size": 8,
                "dtype": "BFloat16"}),
            _event(cat="cuda_runtime", name="cudaLaunchKernel", ts=t + 2, dur=3.0,
                   args={"correlation": 5 * i, "External id": 10 * i}),
            _event(cat="cuda_runtime", name="cudaLaunchKernel", ts=t + 6, dur=3.0,
                   args={"correlation": 5 * i + 1, "External id": 10 * i + 1}),
            _event(name="Cijk_gemm", ts=t + 10, dur=5.0,
                   args={"device": 0, "stream": 7, "correlation": 5 * i}),
            _event(name="ncclDevKernel_AllReduce", ts=t + 20, dur=5.0,
                   args={"device": 0, "stream": 9, "correlation": 5 * i + 1}),
            {"ph": "X", "cat": "python_function", "name": "f", "pid": 0, "tid": 7, "ts": t,
             "dur": 1.0, "args": {"Python id": i, "Python parent id": None}},
            {"ph": "s", "cat": "ac2g", "id": 5 * i, "pid": 0, "tid": 7, "ts": t + 2},
        ]
    return out


def _write(tmp: Path, name: str, events: list, **top: object) -> Path:
    body = json.dumps(events)  # exact integers of any size, unlike orjson
    head = "".join(f"{json.dumps(k)}: {json.dumps(v)}, " for k, v in top.items())
    p = tmp / name
    p.write_bytes(gzip.compress(f'{{"schemaVersion": 1, {head}"traceEvents": {body}}}'
                                .encode()))
    return p


BIG = 18446744073709551616  # 2^64: orjson gives a float, msgspec an exact int
# name -> (events, the path expected to read them)
CASES = {
    "plain": (_job(), "typed"),
    "mixed types": (_job() + [
        _event(pid="Spans", tid="x", ts=5, dur=1),
        _event(ts="12.5", args={"device": "0", "stream": "7", "correlation": 2.0,
                                "bytes": "64"}),
        _event(cat="gpu_memcpy", name="Memcpy HtoD", args={"device": 0, "stream": 7,
                                                           "bytes": True}),
        _event(args=None), _event(args={}), {"ph": "X", "cat": "kernel"},
        _event(cat="cpu_op", name="aten::mm", args={"Input Dims": "?", "Input type": 3}),
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "x"}}], "typed"),
    "integers beyond 64 bits": (_job() + [
        _event(ts=BIG, dur=BIG),
        _event(args={"device": BIG, "stream": BIG, "correlation": BIG, "bytes": BIG}),
        _event(cat="cpu_op", name="record_param_comms", args={
            "Collective name": BIG, "dtype": BIG, "In msg nelems": BIG, "Group size": BIG}),
        _event(cat="cpu_op", name="aten::mm", args={
            "Input Dims": [[BIG, 2], [2, 2]], "Input type": ["float", "float"]})], "typed"),
    "unexpected time values": (_job() + [
        _event(ts=None), _event(dur=-1.0), _event(ts=1e300), _event(dur=[1]),
        _event(ts={"a": 1})], "typed"),
    "a name that is not a string": (_job() + [_event(name=5)], "tolerant"),
    "args that are not an object": (_job() + [_event(args="x")], "tolerant"),
    "an event that is not an object": (_job() + [3, None, "x"], "tolerant"),
    "an unhashable category": (_job() + [_event(cat=["kernel"])], "typed"),
    "odd categories and phases": (_job() + [
        _event(ph="B"), _event(ph="i", cat="gpu_memcpy"), _event(ph="M", cat=None),
        _event(cat=None), _event(cat=5), _event(ph="f", cat=True), _event(cat=1.0),
        _event(cat="python_function"), {"ph": "X"}, {"ph": "s", "cat": "kernel"}], "typed"),
    # the bulk decode's events are a union tagged by ph: a phase outside the Trace Event
    # Format's, or none, is the tolerant path's to count
    "a phase that is not a trace phase": (_job() + [_event(ph="Q")], "tolerant"),
    "an event without a phase": (_job() + [{"cat": "kernel", "name": "k"}], "tolerant"),
    "a phase that is not a string": (_job() + [_event(ph=1)], "tolerant"),
    "rare args on other rows": (_job() + [
        _event(cat="cpu_op", name="record_param_comms", args=None),
        _event(cat="cpu_op", name="record_param_comms", args={"Collective name": [1]}),
        _event(name="record_param_comms", args={
            "device": 0, "stream": 7, "Collective name": "allreduce", "Group size": "8",
            "Process Group Ranks": "[0, 1]", "Process Group Description": "undefined"}),
        _event(cat="cpu_op", name="aten::addmm", args={"External id": 3}),
        _event(cat="cpu_op", name="aten::bmm", args={
            "Input Dims": [[2, 3, 4], [2, 4, 5]], "Input type": ["c10::BFloat16"] * 2,
            "Concrete Inputs": ["", ""], "External id": 4})], "typed"),
    "no events": ([], "typed"),
    "launch shapes": (_job() + [
        _event(ts=25.0, args={"device": 0, "stream": 7, "grid": [4, 2, 1], "block": [256, 1, 1],
                     "registers per thread": 40, "shared memory": 400}),
        _event(ts=30.0, args={"device": 0, "stream": 7, "grid": [BIG, 1, 1], "block": "256,1,1",
                     "registers per thread": BIG, "shared memory": 1.5}),
        _event(ts=35.0, args={"device": 0, "stream": 7, "grid": [1.0, 1, 1], "block": [],
                     "registers per thread": 0, "shared memory": 0}),
        _event(ts=40.0, args={"device": 0, "stream": 7, "grid": {"x": 1}, "block": [64, None, 1],
                     "registers per thread": "8"}),
        _event(ts=45.0, args={"device": 0, "stream": 7, "grid": [2, True, 1], "block": [64, 1.0, 1],
                     "registers per thread": 4.0, "shared memory": False})], "typed"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_typed_and_tolerant_agree_on_odd_documents(case: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    events, expected = CASES[case]
    path = _write(tmp_path, "t.json.gz", events, baseTimeNanoseconds=1, deviceProperties=[
        {"id": 0, "name": "AMD Instinct MI300X", "numSms": 304, "totalGlobalMem": 192 << 30,
         "computeMajor": 9, "computeMinor": 4, "warpSize": 64}],
                  distributedInfo={"rank": 3, "world_size": 8, "backend": "nccl"})
    monkeypatch.setattr(typed, "CHUNK", 5)  # rows of one op and its kernels span chunks
    fast, how = _read(path, monkeypatch, tolerant=False)
    assert how == expected
    slow, _ = _read(path, monkeypatch, tolerant=True)
    _same(fast, slow)


def test_chunks_keep_row_numbers_for_shapes_and_collectives(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunked decoding numbers rows across chunks: each GEMM kernel gets its own op's FLOPs
    and each collective kernel its record_param_comms size, whatever the chunk size."""
    path = _write(tmp_path, "j.json.gz", _job(7))
    got = []
    for chunk in (1, 3, 5, 1 << 15):
        monkeypatch.setattr(typed, "CHUNK", chunk)
        trace, how = _read(path, monkeypatch, tolerant=False)
        assert how == "typed"
        ev = trace.events.sort("start_ns")
        assert ev.filter(ev["name"] == "Cijk_gemm")["flops"].to_list() == [2.0 * 64 * 32 * 16] * 7
        assert ev.filter(ev["name"] == "ncclDevKernel_AllReduce")["msg_bytes"].to_list() == \
            [2048] * 7
        got.append(ev)
    assert all(g.equals(got[0], null_equal=True) for g in got)


def test_damaged_documents_give_the_same_error_on_both_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = gzip.decompress(_write(tmp_path, "g.json.gz", _job()).read_bytes())
    cases = {"cut.json": good[: len(good) // 2], "null.json": b'{"traceEvents": null}',
             "list.json": b"[1, 2]", "dict.json": b'{"traceEvents": {"a": 1}}'}
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        fast, _ = _read(p, monkeypatch, tolerant=False)
        slow, _ = _read(p, monkeypatch, tolerant=True)
        assert isinstance(fast, str) and fast == slow, name
    # NaN (what Python's json.dump writes for float nan) is not JSON: the typed path hands
    # the document to the tolerant one, which reads it as an unknown value (a skipped event)
    p = tmp_path / "nan.json"
    p.write_bytes(good.replace(b'"dur": 50.0', b'"dur": NaN', 1))
    fast, how = _read(p, monkeypatch, tolerant=False)
    slow, _ = _read(p, monkeypatch, tolerant=True)
    assert how == "tolerant" and not isinstance(fast, str)
    _same(fast, slow)
    assert any("1 NaN/Infinity values" in w for w in fast.meta.warnings)  # type: ignore
    assert any("skipped 1 events without a valid ts/dur" in w
               for w in fast.meta.warnings)  # type: ignore


def test_launch_shapes_are_read_the_same_on_both_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernel args ``grid``/``block``/``registers per thread``/``shared memory`` become the
    model's ``launch`` text; values that are not 64-bit integers (lists of them) are left
    out, never guessed, and both decodes agree."""
    path = _write(tmp_path, "l.json.gz", CASES["launch shapes"][0])
    for tolerant in (False, True):
        trace, _ = _read(path, monkeypatch, tolerant=tolerant)
        ev = trace.events.filter(trace.events["name"] == "k").sort("start_ns", "correlation_id")
        assert ev["launch"].to_list() == ["grid=4,2,1 block=256,1,1 regs=40 shared=400",
                                          None, "shared=0", None, None], tolerant
        # rows 2, 3 (the empty block), 4, 5; the BIG value of the job is not a kernel's
        assert [w for w in trace.meta.warnings if "launch-shape" in w] == [
            "l.json.gz: 4 kernels have a launch-shape arg (grid, block, registers per thread, "
            "shared memory) that is not an integer (list of them): left out of launch, unknown"]
