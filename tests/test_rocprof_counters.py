"""Hardware counters (``rocprofv3 --pmc``) fill per-dispatch FLOPs and bytes in every rocprofv3
reader (issue 12 item 1): rocpd PMC tables, ``counter_collection.csv`` and JSON counter
records, written by our writers; and the real counter CSVs in ``shared/traces``. A counter set
that does not determine FLOPs (or bytes) leaves them null, and a warning says why."""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest

import tracelens
from tracelens_dev.writers.rocprof import write_csv, write_json, write_rocpd
from tests.conftest import REAL_ROCPROF, SAMPLES, cli
from tests.test_bad_input import _assert_one_line_error

WRITERS = {
    "json": lambda t, d, c: write_json(t, d / "1_results.json", counters=c)[0],
    "rocpd": lambda t, d, c: write_rocpd(t, d / "1_results.db", counters=c)[0],
    "csv-7": lambda t, d, c: _kernel_csv(write_csv(t, d, layout="7", counters=c)),
    "csv-rocpd": lambda t, d, c: _kernel_csv(write_csv(t, d, layout="rocpd",
                                                               counters=c)),
}
# MI300 HBM counters of the reduction kernel: 128*10 + 32*20 + 64*(100-10-20) + 32*(50-5)
# + 64*5 bytes (shared/reference/rocprof.md §5.4)
HBM_MI300 = 128 * 10 + 32 * 20 + 64 * (100 - 10 - 20) + 32 * (50 - 5) + 64 * 5


def _kernel_csv(files: list[Path]) -> Path:
    return next(f for f in files if f.name.endswith("kernel_trace.csv"))


@pytest.fixture(scope="module")
def sample() -> tuple[tracelens.Trace, pl.DataFrame, dict[str, str]]:
    trace = tracelens.load(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    first = {c: trace.events.filter(pl.col("category") == c)["name"].sort()[0]
             for c in ("gemm", "elementwise", "reduction", "attention")}
    rows = [(first["gemm"], "SQ_INSTS_VALU_MFMA_MOPS_BF16", 1000.0),
            (first["gemm"], "SQ_INSTS_VALU_MFMA_MOPS_F32", 10.0),
            (first["gemm"], "FETCH_SIZE", 2.0),  # no WRITE_SIZE: bytes unknown
            (first["elementwise"], "FETCH_SIZE", 3.0),
            (first["elementwise"], "WRITE_SIZE", 0.5),
            (first["reduction"], "TCC_BUBBLE", 10.0),
            (first["reduction"], "TCC_EA0_RDREQ_32B", 20.0),
            (first["reduction"], "TCC_EA0_RDREQ", 100.0),
            (first["reduction"], "TCC_EA0_WRREQ", 50.0),
            (first["reduction"], "TCC_EA0_WRREQ_64B", 5.0),
            (first["reduction"], "SQ_INSTS_VALU_FMA_F32", 7.0),
            (first["attention"], "GRBM_GUI_ACTIVE", 123.0)]  # determines neither
    counters = pl.DataFrame(rows, schema={"name": pl.String, "counter": pl.String,
                                          "value": pl.Float64}, orient="row")
    return trace, counters, first


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_counters_written_and_read_back_give_exact_costs(sample, tmp_path: Path,
                                                         fmt: str) -> None:
    trace, counters, first = sample
    back = tracelens.load(WRITERS[fmt](trace, tmp_path, counters))
    ev = back.events
    by = {c: ev.filter(pl.col("name") == n) for c, n in first.items()}
    n_of = {c: trace.events.filter(pl.col("name") == n).height for c, n in first.items()}
    gemm = by["gemm"]
    assert gemm.height == n_of["gemm"] > 0
    assert gemm["flops"].to_list() == [512.0 * 1010] * gemm.height
    assert gemm["dtype"].unique().to_list() == ["bf16"]  # the type with the most MFMA ops
    assert gemm["bytes"].null_count() == gemm.height  # FETCH_SIZE alone is reads only
    assert gemm["cost_source"].unique().to_list() == ["counters"]
    ew = by["elementwise"]
    assert ew["bytes"].to_list() == [1024.0 * 3.5] * ew.height
    assert ew["flops"].null_count() == ew.height  # no FLOP counter: unknown, not zero
    red = by["reduction"]
    assert red["bytes"].to_list() == [float(HBM_MI300)] * red.height
    assert red["flops"].to_list() == [64.0 * 2 * 7] * red.height and \
        red["dtype"].unique().to_list() == ["fp32"]
    att = by["attention"]
    assert att["cost_source"].null_count() == att.height and att["flops"].null_count() == \
        att.height
    others = ev.filter(~pl.col("name").is_in(list(first.values()))
                       & (pl.col("kind") == "kernel"))
    assert others["cost_source"].null_count() == others.height
    note = [w for w in back.meta.warnings if "hardware counters" in w]
    with_pmc = sum(n_of.values())
    assert len(note) == 1 and f"on {with_pmc} of " in note[0]
    assert f"FLOPs from counters on {n_of['gemm'] + n_of['reduction']}" in note[0]
    assert f"HBM bytes on {n_of['elementwise'] + n_of['reduction']}" in note[0]


def test_without_counters_nothing_changes(sample, tmp_path: Path) -> None:
    trace = sample[0]
    path = write_json(trace, tmp_path / "1_results.json")[0]
    back = tracelens.load(path)
    assert back.events["cost_source"].null_count() == back.events.height
    assert not any("hardware counters" in w for w in back.meta.warnings)


def _real(name: str) -> Path:
    path = REAL_ROCPROF / "counters_gfx1151" / name
    if not path.exists():
        pytest.skip(f"{path} not present")
    return path


@pytest.mark.parametrize("name", ["prefill_fetch_counter_collection.csv",
                                  "decode_stall_counter_collection.csv"])
def test_real_counter_csv_reads_as_its_dispatches(name: str) -> None:
    """Real ``rocprofv3 --pmc`` output (no kernel trace beside it): one event per dispatch
    with the file's own timestamps; these counter sets determine neither FLOPs nor bytes."""
    path = _real(name)
    rows = list(csv.DictReader(path.open()))
    dispatches = {int(r["Dispatch_Id"]): (int(r["Start_Timestamp"]), int(r["End_Timestamp"]),
                                          r["Kernel_Name"]) for r in rows}
    trace = tracelens.load(path)
    ev = trace.events.sort("start_ns")
    assert ev.height == len(dispatches)
    assert sorted(zip(ev["start_ns"], ev["end_ns"], ev["name"])) == sorted(dispatches.values())
    assert ev["flops"].null_count() == ev["bytes"].null_count() == ev.height
    # launch: VGPRs and LDS only (Grid_Size/Workgroup_Size here are products, not dimensions)
    shapes = {(int(r["Start_Timestamp"]), f"regs={r['VGPR_Count']} shared={r['LDS_Block_Size']}"
               if r["VGPR_Count"] != "0" else f"shared={r['LDS_Block_Size']}") for r in rows}
    assert set(zip(ev["start_ns"], ev["launch"])) == shapes
    note = next(w for w in trace.meta.warnings if "hardware counters" in w)
    assert f"on {len(dispatches)} of {len(dispatches)} kernel dispatches" in note
    assert "FLOPs unknown: no FLOP counter was collected" in note


def test_real_fetch_size_with_write_size_gives_bytes(tmp_path: Path) -> None:
    """The real file plus a WRITE_SIZE row per dispatch: bytes = 1024 x (FETCH + WRITE)."""
    path = _real("prefill_fetch_counter_collection.csv")
    rows = list(csv.DictReader(path.open()))
    fetch = {int(r["Dispatch_Id"]): float(r["Counter_Value"]) for r in rows}
    with (tmp_path / "x_counter_collection.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), quoting=csv.QUOTE_ALL)
        w.writeheader()
        for r in rows:
            w.writerow(r)
            w.writerow({**r, "Counter_Name": "WRITE_SIZE", "Counter_Value": "0.25"})
    trace = tracelens.load(tmp_path / "x_counter_collection.csv")
    got = sorted(trace.events["bytes"].to_list())
    assert got == sorted(1024.0 * (v + 0.25) for v in fetch.values())
    assert trace.events["cost_source"].unique().to_list() == ["counters"]


def test_counter_csv_without_timestamps_alone_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "1_counter_collection.csv"
    path.write_text('"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id",'
                    '"Thread_Id","Grid_Size","Kernel_Name","Workgroup_Size","LDS_Block_Size",'
                    '"Scratch_Size","VGPR_Count","SGPR_Count","Counter_Name","Counter_Value"\n'
                    '1,1,2,1,7,7,64,"k",64,0,0,8,16,"SQ_WAVES",4\n')
    _assert_one_line_error(cli("summarize", str(path)), path, "the dispatches have no time")


def test_counters_travel_as_the_readers_facts_and_are_used_up() -> None:
    """The reader hands its counters to the core's cost stage as ``CounterFacts`` beside its
    own ``RocprofFacts`` (its processes on the host clock); the stage drops them once used,
    so a loaded trace (and what a worker sends back) carries none."""
    from parsers.rocprof import read_csv
    from parsers.rocprof.facts import RocprofFacts
    from tracelens.core.model import CounterFacts, HostClockFacts

    path = _real("prefill_fetch_counter_collection.csv")
    read = read_csv(path)
    (handed,) = read.meta.facts(CounterFacts)
    assert [c.values.height for c in handed.processes] == [read.events.height]
    trace = tracelens.load(path)
    assert trace.meta.facts(CounterFacts) == []
    (clocked,) = trace.meta.facts(HostClockFacts)
    assert isinstance(clocked, RocprofFacts) and clocked.clock == "CLOCK_BOOTTIME"
    assert [p.rank for p in clocked.processes] == [0]
