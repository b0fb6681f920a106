"""``tracelens critical-path`` on constructed traces with a known answer (issue 27): each
scenario is written by our writers (XSpace; Kineto and rocpd where the format can say it),
read back, and its path and composition must be exactly the construction's."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import tracelens
from tracelens.analyze.critical.path import CriticalPath, CriticalPathOptions
from tracelens.engine.hosts import EngineOptions, LoadOptions, run
from tracelens.core.model import (
    DEVICE_SCHEMA, EVENT_SCHEMA, HOST_EVENT_SCHEMA, STEP_SCHEMA, Trace,
                             conform)
from tracelens.engine.protocol import run_trace
from tracelens.results.critical_path import CriticalPathResult
from tracelens.results.encode import encode

GEMM = "Cijk_Ailk_Bljk_BBS_BH_MT256x224x64_MI16x16x16x1_SN_1LDSB0.kd"
ADD = "loop_add_fusion.kd"
RED = "input_reduce_fusion.kd"
AR = "ncclDevKernel_Generic_4(x)"
OPS = {GEMM: "dot.1", ADD: "add_fusion", RED: "reduce_fusion", AR: "all-reduce-start.1"}


def scenario(kernels: list[tuple], api: list[tuple], step: tuple[int, int],
             hosts: tuple[str, ...] = ("n0",)) -> Trace:
    """kernels: (host index, stream, name, start, end, correlation id or None);
    api: (host index, name, start, end, correlation id or None) on thread 7; one step."""
    events = conform(pl.DataFrame({
        "host": [hosts[k[0]] for k in kernels], "rank": [k[0] for k in kernels],
        "device": [0] * len(kernels), "stream": [k[1] for k in kernels],
        "kind": ["kernel"] * len(kernels), "name": [k[2] for k in kernels],
        "op": [OPS[k[2]] for k in kernels],
        "subcategory": ["all-reduce" if k[2] == AR else None for k in kernels],
        "category": ["collective" if k[2] == AR else None for k in kernels],
        "start_ns": [k[3] for k in kernels], "end_ns": [k[4] for k in kernels],
        "correlation_id": [k[5] for k in kernels]}), EVENT_SCHEMA)
    host = conform(pl.DataFrame({
        "host": [hosts[a[0]] for a in api], "rank": [a[0] for a in api],
        "pid": [100] * len(api), "tid": [7] * len(api),
        "name": [a[1] for a in api], "start_ns": [a[2] for a in api],
        "end_ns": [a[3] for a in api], "correlation_id": [a[4] for a in api],
        "kind": ["api"] * len(api)}, schema_overrides={"correlation_id": pl.Int64}),
        HOST_EVENT_SCHEMA)
    n = len(hosts)
    steps = conform(pl.DataFrame({"rank": list(range(n)), "step": [1] * n,
                                  "start_ns": [step[0]] * n, "end_ns": [step[1]] * n,
                                  "source": ["annotation"] * n}), STEP_SCHEMA)
    devices = conform(pl.DataFrame({"host": list(hosts), "rank": list(range(n)),
                                    "device": [0] * n, "vendor": ["AMD"] * n,
                                    "arch": ["gfx942"] * n}), DEVICE_SCHEMA)
    return Trace(events=events, host_events=host, steps=steps, devices=devices)


# Random two-rank traces (the C walk's and the C forward pass's end-to-end property tests):
# kernels (host, stream, name index, start µs, duration µs, launched) and host calls (host,
# start µs, duration µs, a sync call or plain CPU work).
RANDOM_KERNEL = st.tuples(st.integers(0, 1), st.integers(1, 2), st.integers(0, 3),
                          st.integers(0, 60), st.integers(0, 12), st.booleans())
RANDOM_API = st.tuples(st.integers(0, 1), st.integers(0, 60), st.integers(0, 6), st.booleans())
RANDOM_TRACES = given(st.lists(RANDOM_KERNEL, min_size=1, max_size=14),
                      st.lists(RANDOM_API, max_size=8), st.sampled_from([None, (5_000, 50_000)]))
"""The draws of :func:`random_trace` (kernels, host calls, a step window or none)."""


def random_trace(kernels: list[tuple], apis: list[tuple],
                 step: tuple[int, int] | None) -> Trace:
    """A :func:`scenario` of ``RANDOM_KERNEL`` and ``RANDOM_API`` draws: each launched kernel
    gets a launch call just before it starts (so the launch may bind)."""
    names = [GEMM, AR, RED, list(OPS)[1]]
    ks, launches, corr = [], [], 1
    for host, stream, name, start, dur, launched in kernels:
        k = (host, stream, names[name], start * 1000, (start + dur) * 1000,
             corr if launched else None)
        ks.append(k)
        if launched:
            launches.append((host, "hipLaunchKernel", max(0, k[3] - 2000), max(0, k[3] - 1000),
                             corr))
            corr += 1
    for host, start, dur, sync in apis:
        launches.append((host, "hipDeviceSynchronize" if sync else "cpu_work", start * 1000,
                         (start + dur) * 1000, None))
    return scenario(ks, launches, step or (0, 80_000), hosts=("n0", "n1"))



def as_xspace(trace: Trace, tmp: Path) -> list[Path]:
    from tracelens_dev.writers.xspace import write

    if trace.devices.height == 1:
        return write(trace, tmp / "t.xplane.pb")
    write(trace, tmp / "logs")
    return [tmp / "logs"]


def as_kineto(trace: Trace, tmp: Path) -> list[Path]:
    from tracelens_dev.writers.kineto import write

    return write(trace, tmp / "kineto")


def as_rocpd(trace: Trace, tmp: Path) -> list[Path]:
    from tracelens_dev.writers.rocprof import write_rocpd

    return write_rocpd(trace, tmp / "results.db")


STEP = r"^step (\d+)$"  # the ROCTx ranges the rocprof writers make of steps


def analyze(files: list[Path], **kw: object) -> CriticalPathResult:
    """The analysis both ways (one process on the loaded trace; the engine on the files):
    they must agree. rocpd files: steps from the writer's ROCTx ranges."""
    marker = STEP if any(f.suffix == ".db" for f in files) else None
    opts = CriticalPathOptions(**kw)  # type: ignore[arg-type]
    here = run_trace(CriticalPath(), tracelens.load(files, step_marker=marker), opts)
    engine = run(CriticalPath(), files, opts, LoadOptions(step_marker=marker),
                 EngineOptions(workers=1))
    assert encode(here) == encode(engine)
    return here


def comp(result: CriticalPathResult, i: int = 0) -> dict[str, int]:
    path = result.paths[i]
    out = {c.component: c.ns for c in path.composition}
    assert sum(out.values()) == path.length_ns == path.window.end_ns - path.window.start_ns
    return out


def on_path(result: CriticalPathResult, i: int = 0) -> list[tuple[str, int]]:
    return [(a.name, a.on_path_ns) for a in result.paths[i].activities if a.device is not None]


def what_if(result: CriticalPathResult, change: str, target: str) -> int:
    got = [w for w in result.what_if if (w.change, w.target) == (change, target)]
    assert len(got) == 1, result.what_if
    assert 0 <= got[0].saved_ns <= got[0].on_path_ns or got[0].saved_ns == 0
    return got[0].saved_ns


def test_names_classify_as_the_constructions_say(tmp_path: Path) -> None:
    t = tracelens.load(as_xspace(scenario(
        [(0, 1, n, 1000 * i, 1000 * i + 500, None) for i, n in enumerate(OPS)], [],
        (0, 10_000)), tmp_path))
    cats = dict(t.events.select("name", pl.col("category").cast(pl.String)).rows())
    assert cats == {GEMM: "gemm", ADD: "elementwise", RED: "reduction", AR: "collective"}


# -- a host-bound step: the path runs through the launching thread ----------------------------

HOST_BOUND = dict(
    kernels=[(0, 1, GEMM, 12_000, 14_000, 1), (0, 1, GEMM, 42_000, 44_000, 2),
             (0, 1, GEMM, 72_000, 74_000, 3)],
    api=[(0, "hipLaunchKernel", 10_000, 11_000, 1), (0, "hipLaunchKernel", 40_000, 41_000, 2),
         (0, "hipLaunchKernel", 70_000, 71_000, 3)],
    step=(0, 80_000))


def test_host_bound_step_path_through_the_cpu(tmp_path: Path) -> None:
    r = analyze(as_xspace(scenario(**HOST_BOUND), tmp_path))  # type: ignore[arg-type]
    # end: idle 6000 after K3; K3 2000; launch latency 1000; the thread: three launches
    # (3000), the two gaps between them (58000) and its own untraced time before the first
    # launch, from the step's start (10000: the thread runs the step, it was not idle)
    assert comp(r) == {"host": 71_000, "idle": 6_000, "gemm": 2_000, "launch_latency": 1_000}
    assert on_path(r) == [(GEMM, 2_000)]  # only the last kernel: the others waited for no one
    assert r.paths[0].graph == "host+device"
    # graph-launched: one replay issues the three kernels, which wait for no launch call and
    # run back to back from 12000 (to 18000); the calls and the host time between them (what
    # produced the launches) are gone, so the thread ends at 10000; the same 6000 of idle
    # tail: 24000, 56000 sooner (the simulator's graph launch, docs/simulator.md)
    assert what_if(r, "graph_launch", "host launches") == 56_000


# -- a device-bound step: the path runs through the stream -------------------------------------

DEVICE_BOUND = dict(
    kernels=[(0, 1, GEMM, 10_000, 40_000, 1), (0, 1, RED, 40_500, 70_000, 2),
             (0, 1, ADD, 70_000, 90_000, 3)],
    api=[(0, "hipLaunchKernel", 1_000, 2_000, 1), (0, "hipLaunchKernel", 3_000, 4_000, 2),
         (0, "hipLaunchKernel", 5_000, 5_500, 3),
         (0, "hipDeviceSynchronize", 6_000, 91_000, 99)],
    step=(0, 95_000))


def test_device_bound_step_path_through_the_stream(tmp_path: Path) -> None:
    r = analyze(as_xspace(scenario(**DEVICE_BOUND), tmp_path))  # type: ignore[arg-type]
    # idle tail 4000; the sync returns 1000 after K3; K3, K2 (500 idle before it), K1;
    # K1 waited 8000 after its launch [1000, 2000); before the launch, the thread's own
    # untraced time from the step's start (host 1000)
    assert comp(r) == {"gemm": 30_000, "reduction": 29_500, "elementwise": 20_000,
                       "launch_latency": 8_000, "idle": 4_500, "host": 2_000, "sync": 1_000}
    assert on_path(r) == [(GEMM, 30_000), (RED, 29_500), (ADD, 20_000)]
    assert what_if(r, "graph_launch", "host launches") == 0  # the host is not what it waits for


@pytest.mark.parametrize("fmt", ["kineto", "rocpd"])
def test_device_bound_step_in_other_formats(tmp_path: Path, fmt: str) -> None:
    """Kineto (the writer's own launch layout: one launch every 10 µs from the first kernel)
    and rocpd (no HIP API rows: a device-only graph) give the same device path."""
    write = {"kineto": as_kineto, "rocpd": as_rocpd}[fmt]
    r = analyze(write(scenario(**DEVICE_BOUND), tmp_path))  # type: ignore[arg-type]
    assert on_path(r) == [(GEMM, 30_000), (RED, 29_500), (ADD, 20_000)]
    c = comp(r)
    assert {k: c[k] for k in ("gemm", "reduction", "elementwise")} == {
        "gemm": 30_000, "reduction": 29_500, "elementwise": 20_000}
    w = r.paths[0].window
    # what is left of the window: the gap before K2 and the stretches before K1, after K3
    assert sum(c.values()) - 79_500 == (w.end_ns - w.start_ns) - 79_500
    assert r.paths[0].graph == ("device-only" if fmt == "rocpd" else "host+device")


# -- a cross-stream event wait ----------------------------------------------------------------

def test_cross_stream_event_wait(tmp_path: Path) -> None:
    t = scenario(kernels=[(0, 1, GEMM, 10_000, 50_000, 1), (0, 2, ADD, 50_000, 60_000, 2)],
                 api=[(0, "hipLaunchKernel", 1_000, 2_000, 1),
                      (0, "hipStreamWaitEvent", 3_000, 3_500, 98),
                      (0, "hipLaunchKernel", 4_000, 5_000, 2)], step=(0, 60_000))
    r = analyze(as_xspace(t, tmp_path))
    # K2 on stream 2 waited for K1 on stream 1 (the event), not for its launch
    assert on_path(r) == [(GEMM, 40_000), (ADD, 10_000)]
    # (K1 waited 8000 after its launch [1000, 2000), and before it the thread's own time)
    assert comp(r) == {"gemm": 40_000, "elementwise": 10_000, "launch_latency": 8_000,
                       "host": 2_000}
    # the same launches without the wait call, on a rank that records no stream wait at all:
    # the step's order across streams binds (K2 started when K1 ended, 45 us after its
    # launch), not 45 us of launch latency
    t2 = scenario(kernels=[(0, 1, GEMM, 10_000, 50_000, 1), (0, 2, ADD, 50_000, 60_000, 2)],
                  api=[(0, "hipLaunchKernel", 1_000, 2_000, 1),
                       (0, "hipLaunchKernel", 4_000, 5_000, 2)], step=(0, 60_000))
    r2 = analyze(as_xspace(t2, tmp_path / "nowait"))
    assert on_path(r2) == [(GEMM, 40_000), (ADD, 10_000)]
    assert "launch_latency" not in comp(r2) or comp(r2)["launch_latency"] < 45_000
    # where the rank does record stream waits (here for another kernel), a kernel without
    # one waited for its launch: the trace would have said otherwise
    t3 = scenario(kernels=[(0, 1, GEMM, 10_000, 50_000, 1), (0, 2, ADD, 50_000, 60_000, 2),
                           (0, 1, ADD, 50_000, 55_000, 3)],
                  api=[(0, "hipLaunchKernel", 1_000, 2_000, 1),
                       (0, "hipLaunchKernel", 4_000, 5_000, 2),
                       (0, "hipStreamWaitEvent", 5_500, 5_800, 97),
                       (0, "hipLaunchKernel", 6_000, 7_000, 3)], step=(0, 60_000))
    r3 = analyze(as_xspace(t3, tmp_path / "waits"))
    assert on_path(r3)[-1] == (ADD, 10_000)
    assert comp(r3)["launch_latency"] == 45_000


# -- a straggler at an all-reduce --------------------------------------------------------------

STRAGGLER = dict(
    kernels=[(0, 1, GEMM, 10_000, 20_000, None), (0, 1, AR, 20_000, 60_000, None),
             (1, 1, GEMM, 10_000, 50_000, None), (1, 1, AR, 50_000, 60_000, None)],
    api=[], step=(0, 70_000), hosts=("n0", "n1"))


@pytest.mark.parametrize("fmt", ["xspace", "rocpd"])
def test_straggler_rank_at_an_all_reduce(tmp_path: Path, fmt: str) -> None:
    write = {"xspace": as_xspace, "rocpd": as_rocpd}[fmt]
    r = analyze(write(scenario(**STRAGGLER), tmp_path))  # type: ignore[arg-type]
    by_rank = {p.rank: i for i, p in enumerate(r.paths)}
    fast, slow = by_rank[0], by_rank[1]
    slow_name = f"{r.paths[slow].host}/GPU0"
    # n0 waits 30000 for n1 inside its all-reduce; n1 waits for no one
    assert comp(r, fast) == {"idle": 20_000, "gemm": 10_000, "communication": 10_000,
                             f"wait:{slow_name}": 30_000}
    assert comp(r, slow) == {"idle": 20_000, "gemm": 40_000, "communication": 10_000}
    # n1 on time (its delay removed, as if the trace were made without it): n0 no longer
    # waits, and n1's GEMM takes what n0's took (10000, the peers' median of the same
    # kernel): both GEMMs end at 20000, the all-reduce at 30000, the step's work 30000 sooner
    assert what_if(r, "on_time", slow_name) == 30_000


# -- a collective hidden behind compute ---------------------------------------------------------

HIDDEN = dict(kernels=[(0, 1, GEMM, 10_000, 60_000, None), (0, 2, AR, 20_000, 40_000, None)],
              api=[], step=(0, 70_000))


@pytest.mark.parametrize("fmt", ["xspace", "kineto", "rocpd"])
def test_hidden_collective_saves_nothing(tmp_path: Path, fmt: str) -> None:
    write = {"xspace": as_xspace, "kineto": as_kineto, "rocpd": as_rocpd}[fmt]
    r = analyze(write(scenario(**HIDDEN), tmp_path))  # type: ignore[arg-type]
    assert on_path(r) == [(GEMM, 50_000)]
    assert "communication" not in comp(r)
    assert what_if(r, "hide", "all-reduce") == 0


def test_roofline_what_if_runs_a_category_at_its_attainable_time(tmp_path: Path) -> None:
    """The device-bound step with the GEMM costed so that its roofline time is 10 µs of its
    30: the stream behind it moves up by 20 µs, and so does the sync and the window's end."""
    from tracelens.core import hardware

    t = tracelens.load(as_xspace(scenario(**DEVICE_BOUND), tmp_path))  # type: ignore[arg-type]
    spec = hardware.find_spec("mi300x", hardware.SPECS)
    assert spec is not None
    t.devices = t.devices.with_columns(spec_id=pl.lit(spec.id))  # the writer names no product
    flops = spec.peak("bf16") * 1e3 * 10_000  # TFLOP/s x ns -> 10 µs of compute
    gemm = pl.col("name") == GEMM
    t.events = t.events.with_columns(flops=pl.when(gemm).then(pl.lit(flops)),
                                     bytes=pl.when(gemm).then(pl.lit(1e6)),
                                     dtype=pl.when(gemm).then(pl.lit("bf16")))
    r = run_trace(CriticalPath(), t, CriticalPathOptions())
    w = [x for x in r.what_if if x.change == "roofline"]
    assert [(x.target, x.saved_ns, x.on_path_ns) for x in w] == [("gemm", 20_000, 30_000)]


# -- --time: the same stretch on every rank, from the job's zero --------------------------------

def test_time_window_counts_from_the_jobs_zero_on_every_rank(tmp_path: Path) -> None:
    """``--time 15us:60us`` on a two-host job (two files, so the engine would otherwise read
    each host alone, on its own zero): the job is read whole, each rank's
    window is [zero + 15000, zero + 60000), its composition adds up to 45000; an open end
    runs to the last activity; a stretch with nothing in it is exit 2 with one line."""
    from click.testing import CliRunner

    from tracelens.cli.commands import main
    from tracelens.loading.filters import trace_zero

    from dataclasses import replace

    t = scenario(**STRAGGLER)  # type: ignore[arg-type]
    # no steps, and host n1 starts 5 µs later: the job's zero (n0's first kernel) is not
    # n1's own, so a per-host reading of --time would put n1's window 5 µs late
    late = pl.when(pl.col("host") == "n1").then(5_000).otherwise(0)
    t = replace(t, steps=t.steps.clear(), events=t.events.with_columns(
        start_ns=pl.col("start_ns") + late, end_ns=pl.col("end_ns") + late))
    files = as_xspace(t, tmp_path)
    zero = trace_zero(tracelens.load(files))
    for workers in (1, 2):
        r = run(CriticalPath(), files, CriticalPathOptions(time=(15_000, 60_000)),
                engine=EngineOptions(workers=workers))
        assert [(p.window.start_ns - zero, p.window.end_ns - zero) for p in r.paths] == [
            (15_000, 60_000), (15_000, 60_000)]
        assert [sum(comp(r, i).values()) for i in range(2)] == [45_000, 45_000]
    here = run_trace(CriticalPath(), tracelens.load(files), CriticalPathOptions(time=(15_000,
                                                                                     None)))
    assert {p.window.end_ns - zero for p in here.paths} == {55_000}  # the last activity's end
    out = CliRunner().invoke(main, ["critical-path", *map(str, files), "--time", "15us:60us",
                                    "--format", "json"])
    assert out.exit_code == 0, out.output
    import json
    assert [p["window"]["end_ns"] - p["window"]["start_ns"]
            for p in json.loads(out.output)["paths"]] == [45_000, 45_000]
    bad = CliRunner().invoke(main, ["critical-path", *map(str, files), "--time", "1s:2s"])
    assert bad.exit_code == 2 and "no device activity in --time 1000ms:2000ms" in bad.output
    assert len(bad.output.strip().splitlines()) == 1, bad.output


@RANDOM_TRACES
@settings(deadline=None)  # a loaded machine: no timed assertion in a test
def test_nodes_in_any_row_order_or_chunks_give_the_same_result(
        kernels: list, apis: list, step: tuple[int, int] | None) -> None:
    """The merged nodes are used as they come when their ids are in order (a job's million
    nodes are not gathered again) and sorted by id when not; in many chunks (one per host,
    as merged) or one: the same result, byte for byte, as the nodes in id order."""
    from dataclasses import replace

    from tracelens.engine.protocol import JobPlan

    trace = random_trace(kernels, apis, step)
    opts = CriticalPathOptions(activities="all")
    cp = CriticalPath()
    part = cp.merge([cp.partial(trace, opts)], JobPlan.of_trace(trace))
    want = encode(cp.finish(part, opts))
    nodes = part.nodes.sort("id")
    assume(nodes.height > 1)  # (a window with nothing in it has no order to change)
    shuffled = nodes.sample(fraction=1.0, shuffle=True, seed=nodes.height)
    chunked = pl.concat([nodes.slice(i, 2) for i in range(0, nodes.height, 2)], rechunk=False)
    for variant in (nodes, shuffled, chunked):
        assert encode(cp.finish(replace(part, nodes=variant), opts)) == want


def test_path_rows_share_one_str_per_distinct_text() -> None:
    """A path's activity rows are ``iter_rows``' values, each distinct text of a column one
    str object (a whole trace's paths list millions of rows of a few hundred names)."""
    from tracelens.analyze.critical.path import _shared_text_rows

    frame = pl.DataFrame({
        "kind": ["kernel", "api", None, "kernel"],
        "name": pl.Series(["gemm.kd", "launch", "gemm.kd", "gemm.kd"], dtype=pl.Categorical),
        "category": pl.Series(["gemm", None, "gemm", "gemm"],
                              dtype=pl.Enum(["gemm", "other"])),
        "device": [0, None, 1, 0], "start_ns": [2**62, 5, 7, 9]})
    frame = frame.with_columns(name2=pl.concat_str(pl.col("name"), pl.lit("")))  # fresh strs
    got = list(_shared_text_rows(frame))
    assert got == list(frame.iter_rows())
    for col in (0, 1, 2, 5):
        by_text: dict[object, int] = {}
        for row in got:
            if row[col] is not None:
                assert by_text.setdefault(row[col], id(row[col])) == id(row[col])


@pytest.mark.parametrize("chains", [1, 7, 600])
def test_chain_cummax_equals_a_window_per_chain(chains: int) -> None:
    """The forward pass's per-chain running max (one accumulate per chain, or the polars
    window past 512 chains) equals polars' ``cum_max().over(chain)``, -inf included."""
    import numpy as np

    from tracelens.analyze.critical import solve as critical_solve

    rng = np.random.default_rng(chains)
    sizes = rng.integers(1, 40, chains)
    chain = np.repeat(np.arange(1, chains + 1), sizes)
    x = rng.normal(0, 1e6, len(chain))
    x[rng.random(len(x)) < 0.2] = -np.inf
    want = pl.DataFrame({"x": x, "c": chain}).select(
        pl.col("x").cum_max().over("c"))["x"].to_numpy()
    assert np.array_equal(critical_solve._chain_cummax(x, chain), want)


def test_only_the_longest_path_lists_its_activities_when_asked() -> None:
    """``activities="longest"`` (what summarize asks): the same paths, compositions and
    what-ifs; only the longest path keeps its activities, exactly as with all of them; with
    ``"none"`` (the terminal and Markdown tables) no path keeps any."""
    from dataclasses import replace

    from tests.conftest import SAMPLES

    trace = tracelens.load(SAMPLES / "mi355x_2x8gpu_straggler")
    full = run_trace(CriticalPath(), trace, CriticalPathOptions(top=3))
    lean = run_trace(CriticalPath(), trace, CriticalPathOptions(top=3, activities="longest"))
    bare = run_trace(CriticalPath(), trace, CriticalPathOptions(top=3, activities="none"))
    from tracelens.analyze.critical.walk import step_path_key

    longest = max(full.paths, key=lambda p: step_path_key(p.length_ns, p.idle_after_ns,
                                                          p.rank, p.device))
    assert len(full.paths) > 1 and lean.what_if == full.what_if == bare.what_if
    assert all(p.activities for p in full.paths) and full.notes == lean.notes == bare.notes
    for a, b, c in zip(full.paths, lean.paths, bare.paths, strict=True):
        assert b == (a if a is longest else replace(a, activities=()))
        assert c == replace(a, activities=())


def test_json_is_the_encoded_result_written_as_bytes() -> None:
    """``--format json`` is the result's JSON (:func:`tracelens.to_json`), written to stdout
    as bytes (a whole trace's is a GB: no text copy of it), after any text already written."""
    import click
    from click.testing import CliRunner

    from tracelens.cli.commands import main
    from tracelens.cli.common import print_result
    from tracelens.results.encode import json_bytes, to_json

    from tests.conftest import SAMPLES

    sample = SAMPLES / "h100_8gpu_moe_ddp.xplane.pb"
    out = CliRunner().invoke(main, ["critical-path", str(sample), "--format", "json"])
    res = tracelens.TraceAnalysis(sample).critical_path(activities="all")
    assert res.warnings  # (the readers' warnings are the result's, in its JSON too)
    assert out.exit_code == 0, out.output
    assert out.stdout_bytes == json_bytes(res) + b"\n" == (to_json(res) + "\n").encode()

    @click.command()
    def both() -> None:
        click.echo("text first")
        print_result("json", lambda: b'{\n  "a": 1\n}', lambda: "", lambda: "",
                     lambda console: None)

    assert CliRunner().invoke(both).stdout_bytes == b'text first\n{\n  "a": 1\n}\n'
    import contextlib
    import io

    text = io.StringIO()  # a stream without bytes (a notebook's): the same text
    with contextlib.redirect_stdout(text):
        print_result("json", lambda: b'{"a": 1}', lambda: "", lambda: "", lambda console: None)
    assert text.getvalue() == '{"a": 1}\n'


def test_the_steps_path_is_the_device_whose_work_ended_last(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Planted: two GPUs of one rank share the window [1, 4] ms; GPU0's only kernel ends at
    2 ms, GPU1's at 4 ms. GPU0's path has 2 ms after its last node (``idle_after_ns``),
    GPU1's none, and the step's path (summarize's) is GPU1's, not rank 0's first device."""
    from tracelens.analyze.summary.build import summarize
    from tracelens_dev.writers.xspace import Activity, build_xspace

    p = tmp_path / "two.xplane.pb"
    p.write_bytes(build_xspace([
        Activity(0, 1, "Cijk_gemm_a.kd", 1_000_000, 1_000_000, {"hlo_op": "custom-call.1"}),
        Activity(1, 1, "Cijk_gemm_b.kd", 1_000_000, 3_000_000, {"hlo_op": "custom-call.2"})]))
    t = tracelens.load(p)
    r = run_trace(CriticalPath(), t, CriticalPathOptions())
    after = {pth.device: (pth.length_ns, pth.idle_after_ns) for pth in r.paths}
    assert after == {0: (3_000_000, 2_000_000), 1: (3_000_000, 0)}
    assert summarize(t).critical_path.device == 1
