"""The critical path stitched from the hosts' own graphs equals the job's single graph, byte for
byte (issue 45, item 6; tracelens/analyze/critical/stitched.py): the paths and notes, and the
whole result with its what-ifs.

Each job is loaded whole, its critical-path part cut into one part per host (ids renumbered,
as a host's map makes them), and the two answers compared as JSON: the job's graph of the
parts concatenated (:meth:`CriticalPath.merge`'s order) and the stitched walks. The jobs: the
bundled samples, the simulator's campaign scenarios (the fast subset's seeds, with and without
host events), and the multi-rank jobs of tests/test_critical_path.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import settings

import tracelens
from tracelens.analyze.critical import rounds as cr
from tracelens.analyze.critical import stitched as cs
from tracelens.engine import worker_store as kept
from tracelens.analyze.critical.path import (CriticalPart, CriticalPath, CriticalPathOptions,
                                             critical_paths)
from tracelens.core.errors import TraceInputError
from tracelens.results.encode import encode

from .conftest import SAMPLES, SHARED
from .test_critical_path import (AR, GEMM, RANDOM_TRACES, STRAGGLER, as_xspace, random_trace,
                                 scenario)

OPTIONS = {
    "step": CriticalPathOptions(activities="all"),
    "summarize": CriticalPathOptions(top=3, activities="longest"),
    "whole": CriticalPathOptions(time=(0, None), activities="all"),
}


def host_parts(part: CriticalPart) -> list[CriticalPart]:
    """The job's part cut per host (sorted names), each host's nodes numbered from 0."""
    nodes = part.unpacked().nodes
    assert isinstance(nodes, pl.DataFrame)
    out = []
    for host in sorted(nodes["host"].cast(pl.String).unique().drop_nulls().to_list()):
        mine = nodes.filter(pl.col("host").cast(pl.String) == host).sort("id")
        new = dict(zip(mine["id"].to_list(), range(mine.height)))
        edges = part.edges.filter(pl.col("src").is_in(list(new))).with_columns(
            src=pl.col("src").replace_strict(new, return_dtype=pl.Int64),
            dst=pl.col("dst").replace_strict(new, return_dtype=pl.Int64))
        assert edges.height == part.edges.filter(pl.col("dst").is_in(list(new))).height

        def of(df: pl.DataFrame, h: str = host) -> pl.DataFrame:
            return df.filter(pl.col("host").cast(pl.String) == h)

        out.append(CriticalPart(mine.with_columns(id=pl.int_range(pl.len(), dtype=pl.Int64)),
                                edges, of(part.windows), of(part.host_ranks),
                                of(part.unwindowed)))
    return out


def job_part(parts: list[CriticalPart]) -> CriticalPart:
    """The parts concatenated as :meth:`CriticalPath.merge` places them (already placed)."""
    return cr.merged_placed(parts)


def compare(trace: tracelens.Trace, options: CriticalPathOptions) -> str:
    """'' when the stitched paths equal the job graph's (JSON bytes), else why not; raises
    when they differ."""
    try:
        parts = host_parts(CriticalPath().partial(trace, options))
    except TraceInputError as e:  # (a random trace with no window)
        return str(e)
    if not parts:
        return "no nodes"
    single = critical_paths(job_part(parts), options)
    try:
        paths, notes = cs.stitched_paths(parts, options)
        hosts = cr.LocalHosts([cr.HostSide(p) for p in parts])
        whole = cr.rounds_result(hosts, None, options)
    except cs.NotStitchable as e:
        return str(e)
    want = json.dumps(encode(single.paths)) + json.dumps(list(single.notes))
    got = json.dumps(encode(paths)) + json.dumps(list(notes))
    assert got == want
    # the whole result, what-ifs included, as rounds between the job and its hosts
    assert json.dumps(encode(whole)) == json.dumps(encode(single))
    return ""


SAMPLE_JOBS = ["mi300x_8gpu_llama_step.xplane.pb", "mi355x_8gpu_llama_fsdp.xplane.pb",
               "h100_8gpu_moe_ddp.xplane.pb", "mi355x_2x8gpu_straggler",
               "tpu/multi.xplane.pb", "tpu/sync.xplane.pb"]


@pytest.mark.parametrize("opt", sorted(OPTIONS))
@pytest.mark.parametrize("name", SAMPLE_JOBS)
def test_the_samples(name: str, opt: str) -> None:
    why = compare(tracelens.load([SAMPLES / name]), OPTIONS[opt])
    assert not why, why


SIM_SEEDS = (18, 1, 47, 3, 4, 5, 6, 7, 8, 9, 10, 11)  # the campaign's fast subset


@pytest.mark.parametrize("fmt", ["xspace", "xspace-device"])
@pytest.mark.parametrize("seed", SIM_SEEDS)
def test_the_simulator_scenarios(tmp_path: Path, seed: int, fmt: str) -> None:
    from tracelens_dev.sim.engine import simulate
    from tracelens_dev.sim.scenarios import generate
    from tracelens_dev.sim.trace import write

    (path,) = write(simulate(generate(seed)), fmt, tmp_path)[:1]
    trace = tracelens.load([path])
    for opt in ("summarize", "whole"):
        why = compare(trace, OPTIONS[opt])
        assert not why, why


def test_a_straggler_across_two_hosts(tmp_path: Path) -> None:
    trace = tracelens.load(as_xspace(scenario(**STRAGGLER), tmp_path))  # type: ignore[arg-type]
    parts = host_parts(CriticalPath().partial(trace, OPTIONS["step"]))
    assert len(parts) == 2
    paths, _ = cs.stitched_paths(parts, OPTIONS["step"])
    # the fast rank's walk waits for the slow one and goes on in its history (a segment on
    # the other host): its GEMM, not the fast rank's, is on the path
    fast = next(p for p in paths if p.rank == 0)
    assert {a.host for a in fast.activities} == {p.host for p in paths}
    assert compare(trace, OPTIONS["step"]) == ""


class _Both:
    """The critical path's map as the engine runs it per host; finish: the stitched result
    of the hosts' parts placed in the job, and the job graph's result of their merge."""

    def partial(self, trace: tracelens.Trace, options: CriticalPathOptions) -> CriticalPart:
        return CriticalPath().partial(trace, options)

    def pack(self, part: CriticalPart) -> CriticalPart:
        return CriticalPath().pack(part)

    def merge(self, parts: list[CriticalPart], plan: object) -> tuple:
        return (cs.placed_parts(parts, plan), CriticalPath().merge(parts, plan),  # type: ignore
                parts, plan)

    def finish(self, part: tuple, options: CriticalPathOptions) -> tuple[str, str]:
        placed, merged, parts, plan = part
        single = json.dumps(encode(critical_paths(merged, options)))
        hosts = cr.LocalHosts([cr.HostSide(p) for p in parts])  # placed by the hosts
        assert json.dumps(encode(cr.rounds_result(hosts, plan, options))) == single
        placed_hosts = cr.LocalHosts([cr.HostSide(p) for p in placed])  # placed by the job
        return json.dumps(encode(cr.rounds_result(placed_hosts, None, options))), single


@pytest.mark.parametrize("opt", ["summarize", "whole"])
def test_the_engines_host_parts(tmp_path: Path, opt: str) -> None:
    """The parts as the engine's maps make them, one per host file (placed by the job's plan:
    ranks, names), on the 2x8 sample and a 4-rank simulated job written as a log directory."""
    from tracelens.engine.hosts import EngineOptions, LoadOptions, run_tasks
    from tracelens.engine.protocol import Task
    from tracelens_dev.sim.engine import simulate
    from tracelens_dev.sim.scenarios import generate
    from tracelens_dev.sim.trace import write

    jobs = [SAMPLES / "mi355x_2x8gpu_straggler"]
    for seed in SIM_SEEDS:
        sim = simulate(generate(seed))
        (path,) = write(sim, "xspace", tmp_path / str(seed))[:1]
        if path.is_dir() and len(list(path.rglob("*.xplane.pb"))) > 1:
            jobs.append(path)
            break
    assert len(jobs) == 2
    for job in jobs:
        (got,), ran = run_tasks([Task(_Both(), OPTIONS[opt])], [job], LoadOptions(),
                                EngineOptions(1))
        assert len(ran.hosts) > 1
        stitched, single = got  # type: ignore[misc]
        assert stitched == single


def three_hosts() -> tracelens.Trace:
    """Three ranks on three hosts; the last two arrive at the all-reduce at once."""
    return scenario(kernels=[(0, 1, GEMM, 10_000, 20_000, None), (0, 1, AR, 20_000, 60_000, None),
                             (1, 1, GEMM, 10_000, 50_000, None), (1, 1, AR, 50_000, 60_000, None),
                             (2, 1, GEMM, 10_000, 45_000, None), (2, 1, GEMM, 45_000, 50_000, None),
                             (2, 1, AR, 50_000, 60_000, None)],
                    api=[], step=(0, 70_000), hosts=("n0", "n1", "n2"))


def test_a_tie_for_last_arrival_goes_to_the_first_host() -> None:
    """Two hosts arrive last at once: the job's graph names the first node in the job's
    order (host, then node); so must the stitched walk (the instance table's tie-break)."""
    trace = three_hosts()
    parts = host_parts(CriticalPath().partial(trace, OPTIONS["step"]))
    paths, _ = cs.stitched_paths(parts, OPTIONS["step"])
    fast = next(p for p in paths if p.rank == 0)
    assert "wait:n1/GPU0" in {c.component for c in fast.composition}
    assert compare(trace, OPTIONS["step"]) == ""


@RANDOM_TRACES
@settings(max_examples=60, deadline=None)
def test_random_two_rank_traces(kernels: list, apis: list, step: tuple[int, int] | None
                                ) -> None:
    """Random two-rank traces (streams, all-reduces, launches that may bind, syncs): where
    the stitch is possible, it is the job graph's answer byte for byte."""
    trace = random_trace(kernels, apis, step)
    for opt in ("step", "whole"):
        compare(trace, OPTIONS[opt])


# -- what-ifs: the forward pass of each change, host by host ------------------------------------

def solve_everywhere(parts: list[CriticalPart], options: CriticalPathOptions
                     ) -> list[tuple[bool, int]]:
    """For every forward pass the job's graph makes (the reproduction and each what-if's
    change), whether the hosts' rounds (:func:`critical_segments.stitched_solve`) give every
    node's end bit for bit, and each window's length after a what-if
    (:func:`critical_segments.stitched_lengths`) as the job's graph reads it; and in how many
    rounds."""
    import numpy as np

    from tracelens.analyze.critical import path as cp
    from tracelens.analyze.critical.solve import Change, solve

    seen, lengths = [], {}
    real, real_lengths = cp.solve, cp._lengths

    def record(g, ch=None, *a, **k):  # type: ignore[no-untyped-def]
        ch = Change() if ch is None else ch
        e = real(g, ch, *a, **k)
        seen.append((g, ch, e))
        return e

    def record_lengths(g, paths, e):  # type: ignore[no-untyped-def]
        got = real_lengths(g, paths, e)
        lengths[id(e)] = [int(v) for v in got]
        return got

    cp.solve, cp._lengths = record, record_lengths  # type: ignore[assignment]
    try:
        critical_paths(job_part(parts), options)
    finally:
        cp.solve, cp._lengths = real, real_lengths  # type: ignore[assignment]
    inst = cs.instance_table([cs.arrivals(p) for p in parts])
    hosts = [cs.HostGraph(p, inst, i) for i, p in enumerate(parts)]
    keys = cs.job_keys(hosts)
    win = pl.concat([p.windows for p in parts])
    out = []
    for g, ch, e in seen:
        ends, rounds = cs.stitched_solve(hosts, cs.host_changes(hosts, ch, keys))
        same = bool(np.array_equal(np.concatenate(ends), solve(g, ch)))
        if id(e) in lengths:  # a what-if's projection: each window's length after it
            same &= cs.stitched_lengths(hosts, win, ends) == lengths[id(e)]
        out.append((same, rounds))
    assert lengths
    return out


@pytest.mark.parametrize("name", ["mi300x_8gpu_llama_step.xplane.pb", "mi355x_2x8gpu_straggler"])
def test_what_if_passes_on_the_samples(name: str) -> None:
    parts = host_parts(CriticalPath().partial(tracelens.load([SAMPLES / name]),
                                              OPTIONS["summarize"]))
    got = solve_everywhere(parts, OPTIONS["summarize"])
    assert len(got) > 3 and all(same for same, _ in got), got


@pytest.mark.parametrize("seed", (3, 5, 18))
def test_what_if_passes_on_simulated_jobs(tmp_path: Path, seed: int) -> None:
    from tracelens_dev.sim.engine import simulate
    from tracelens_dev.sim.scenarios import generate
    from tracelens_dev.sim.trace import write

    (path,) = write(simulate(generate(seed)), "xspace", tmp_path)[:1]
    parts = host_parts(CriticalPath().partial(tracelens.load([path]), OPTIONS["summarize"]))
    got = solve_everywhere(parts, OPTIONS["summarize"])
    assert got and all(same for same, _ in got), got


@pytest.mark.parametrize("name", ["mi355x_2x8gpu_straggler", "h100_8gpu_moe_ddp.xplane.pb",
                                  "three hosts"])
def test_peer_time_without_gathering_the_activities(name: str) -> None:
    """on_time's peer time of every device (the median of the other devices' work per kernel
    name and occurrence) from counts per key the hosts answer, equal to the job graph's: on
    the samples (15 and 7 peers: odd counts) and three hosts (2 peers: the mean of two)."""
    import numpy as np

    from tracelens.analyze.critical import path as cp
    from tracelens.analyze.critical.solve import build_graph

    trace = three_hosts() if name == "three hosts" else tracelens.load([SAMPLES / name])
    parts = host_parts(CriticalPath().partial(trace, OPTIONS["summarize"]))
    job = job_part(parts)
    nodes = cp._clipped(job.nodes, job.windows)  # type: ignore[arg-type]
    g = build_graph(nodes, job.edges)
    who = nodes.select(pl.concat_str(pl.col("host"), pl.lit("/GPU"),
                                     pl.col("device").cast(pl.String))).to_series().fill_null("")
    names = sorted(set(who.to_list()) - {""})
    want = cp._peer_work(g, nodes, who, names)
    hosts = cr.LocalHosts([cr.HostSide(p) for p in parts])
    cr.rounds_result(hosts, None, OPTIONS["summarize"])  # (each host's side built)
    before = hosts.rounds
    got = cr._peer_medians(hosts, names)
    offset = np.cumsum([0] + [side.h.n for side in hosts.sides])
    assert sorted(got) == names and hosts.rounds - before > 3  # keys, setup, bisection, rows
    for device in names:
        owner, rows, med = got[device]
        arr = np.full(len(g.w), np.nan)
        arr[offset[owner] + rows] = med
        assert np.array_equal(arr, want[device], equal_nan=True), device


SAMPLED_JOB = SHARED / "traces" / "kineto" / "sampled_128rank_job"


@pytest.mark.skipif(not SAMPLED_JOB.exists(), reason="the shared traces are not here")
def test_a_real_cycle_across_hosts_is_refused() -> None:
    """The shared sampled 128-rank job (two ranks on two hosts): its step is stitched
    identically; its whole trace's graph has a cycle through instances across the hosts (the
    job's one pass finds it; no held-back launch goes back in time, so the job's build keeps
    it and its rounds settle it from below), which the hosts' rounds from above need not
    settle the same way: the stitch refuses it."""
    from tracelens.analyze.critical import path as cp
    from tracelens.analyze.critical.solve import build_graph, solves_in_one_pass

    trace = tracelens.load([SAMPLED_JOB])
    assert compare(trace, OPTIONS["summarize"]) == ""
    assert compare(trace, OPTIONS["whole"]) == "the job's graph has a cycle across hosts"
    job = job_part(host_parts(CriticalPath().partial(trace, OPTIONS["whole"])))
    g = build_graph(cp._clipped(job.nodes, job.windows), job.edges)  # type: ignore[arg-type]
    assert solves_in_one_pass(g) is False


def test_summarize_in_rounds_on_the_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    """summarize on a 2-worker cluster that outlives the map keeps its partials on the
    workers by default: the summary is reduced on a worker and the critical path solved
    there in rounds, and the JSON is the one of the same job in this process and of the
    parts gathered and merged here (``TRACELENS_CRITICAL_ROUNDS=0``)."""
    from distributed import Client

    from tracelens.analyze.summary import on_workers as sr
    from tracelens.analyze.summary.build import SummaryAnalysis
    from tracelens.analyze.summary.types import SummaryOptions
    from tracelens.engine.cluster import local_cluster
    from tracelens.engine.hosts import ENV_KEEP, EngineOptions, LoadOptions, run_tasks
    from tracelens.engine.protocol import Task

    ran: list[str] = []

    def counted(name, real):  # type: ignore[no-untyped-def]
        def f(*a, **k):  # type: ignore[no-untyped-def]
            ran.append(name)
            return real(*a, **k)
        return f

    monkeypatch.setattr(cr, "resident_result", counted("rounds", cr.resident_result))
    monkeypatch.setattr(sr, "resident_summary", counted("summary", sr.resident_summary))
    job = SAMPLES / "mi355x_2x8gpu_straggler"
    task = Task(SummaryAnalysis(), SummaryOptions())
    (here,), _ = run_tasks([task], [job], LoadOptions(), EngineOptions(1))
    out = {}
    with local_cluster(2, str(tmp_path / "dask")) as cluster:
        with Client(cluster, set_as_default=False) as client:
            for value in ("0", ""):
                monkeypatch.setenv(ENV_KEEP, value)
                (res,), _ = run_tasks([task], [job], LoadOptions(),
                                      EngineOptions(None, cluster.scheduler_address))
                out[value] = json.dumps(encode(res))
            # what the finish used is gone from the workers
            left = client.run(lambda: len(kept.STORE))
    assert ran == ["summary", "rounds"]  # only the second run kept its parts there
    assert out[""] == out["0"] == json.dumps(encode(here))
    assert set(left.values()) == {0}


def _grouped_table(hosts: list[cs.Arrivals]) -> pl.DataFrame:
    """The instance table as one group-by of every member of every host (the job's rule:
    per key, two or more members; the latest start, ties to the first host, then its
    first node), the reference the host-by-host fold must equal."""
    rows = pl.concat([h.members.with_columns(host=pl.lit(i, pl.Int64))
                      for i, h in enumerate(hosts)])
    return rows.sort("start_ns", "host", "id", descending=[True, False, False]).group_by(
        "key", maintain_order=True).agg(
        n=pl.len(), a_obs_ns=pl.col("start_ns").first(), last_host=pl.col("host").first(),
        last_id=pl.col("id").first(), who=pl.col("who").first()).filter(
        pl.col("n") >= 2).drop("n")


@pytest.mark.parametrize("seed", range(6))
def test_the_instance_table_folded_host_by_host(seed: int) -> None:
    """Each host's members folded per key, then the hosts folded one at a time, in any
    order and grouping (what the rounds do, so the client holds one row per instance),
    give the table of one group-by of every member: ties of the last arrival within and
    across hosts, instances with one member, a host without members."""
    import random

    rng = random.Random(seed)
    hosts = []
    for h in range(rng.randint(1, 6)):
        n = 0 if h == 1 else rng.randint(1, 40)
        keys = [f"ar:{rng.randint(0, 12)}" for _ in range(n)]
        hosts.append(cs.Arrivals(rng.randint(0, 100) if n else None, pl.DataFrame(
            {"key": keys, "id": list(range(n)), "start_ns": [rng.randint(0, 5) for _ in keys],
             "who": [f"n{h}/GPU{rng.randint(0, 3)}" for _ in keys]},
            schema={"key": pl.String, "id": pl.Int64, "start_ns": pl.Int64,
                    "who": pl.String})))
    want = _grouped_table(hosts)
    assert cs.instance_table(hosts).table.equals(want)
    records = [cs.key_arrivals(h, i) for i, h in enumerate(hosts)]
    rng.shuffle(records)
    half = len(records) // 2
    left = right = None
    for r in records[:half]:
        left = cs.fold_arrivals(left, r)
    for r in records[half:]:
        right = cs.fold_arrivals(right, r)
    both = right if left is None else cs.fold_arrivals(left, right)  # type: ignore[arg-type]
    t0 = min((h.t_min for h in hosts if h.t_min is not None), default=0)
    got = cs.table_of(t0, both)
    assert got.table.equals(want) and got.t0 == cs.instance_table(hosts).t0


def test_the_local_cluster_outlives_the_map(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    """``--workers 2`` (the engine's own local cluster): the cluster is held until the
    finish, so the partials stay on its workers (the summary reduced on a worker, the
    critical path in rounds) and the JSON is the one of the job in this process."""
    from tracelens.analyze.summary import on_workers as sr
    from tracelens.analyze.summary.build import SummaryAnalysis
    from tracelens.analyze.summary.types import SummaryOptions
    from tracelens.engine.hosts import EngineOptions, LoadOptions, run_tasks
    from tracelens.engine.protocol import Task

    ran: list[str] = []
    real_rounds, real_summary = cr.resident_result, sr.resident_summary
    monkeypatch.setattr(cr, "resident_result",
                        lambda *a, **k: ran.append("rounds") or real_rounds(*a, **k))
    monkeypatch.setattr(sr, "resident_summary",
                        lambda *a, **k: ran.append("summary") or real_summary(*a, **k))
    job = SAMPLES / "mi355x_2x8gpu_straggler"
    task = Task(SummaryAnalysis(), SummaryOptions())
    (here,), _ = run_tasks([task], [job], LoadOptions(), EngineOptions(1))
    (there,), _ = run_tasks([task], [job], LoadOptions(), EngineOptions(2))
    assert ran == ["summary", "rounds"]
    assert json.dumps(encode(there)) == json.dumps(encode(here))


def test_a_job_that_fails_after_the_map_lets_go_of_its_parts(tmp_path: Path) -> None:
    """A command's check that refuses the job after the map (``--step`` of no host): what
    the map kept on the workers of a cluster that lives on is let go, and the error is the
    check's."""
    from distributed import Client

    from tracelens.analyze.summary.build import SummaryAnalysis
    from tracelens.analyze.summary.types import SummaryOptions
    from tracelens.engine.cluster import local_cluster
    from tracelens.engine.hosts import EngineOptions, LoadOptions, run_tasks
    from tracelens.engine.protocol import Task

    def refuse(job: object) -> None:
        raise TraceInputError("job", "no such step")

    job = SAMPLES / "mi355x_2x8gpu_straggler"
    with local_cluster(2, str(tmp_path / "dask")) as cluster:
        with Client(cluster, set_as_default=False) as client:
            with pytest.raises(TraceInputError, match="no such step"):
                run_tasks([Task(SummaryAnalysis(), SummaryOptions())], [job], LoadOptions(),
                          EngineOptions(None, cluster.scheduler_address), check=refuse)
            left = client.run(lambda: len(kept.STORE))
    assert set(left.values()) == {0}


def test_a_worker_gone_after_the_map_is_one_error() -> None:
    """A worker that kept hosts' parts and left the cluster before the finish: one input
    error naming it (a task pinned to it would wait forever), none while all are there."""
    class Scheduler:
        def __init__(self, workers: list[str]) -> None:
            self.workers = workers

        def scheduler_info(self) -> dict:
            return {"workers": {w: {} for w in self.workers}}

    where = [kept.Resident("tcp://s:1", "tcp://w:1", "a"), kept.Resident("tcp://s:1", "tcp://w:2",
                                                                     "b")]
    kept.still_there(Scheduler(["tcp://w:1", "tcp://w:2"]), where)
    with pytest.raises(TraceInputError, match="worker tcp://w:2 kept hosts' partials"):
        kept.still_there(Scheduler(["tcp://w:1"]), where)
