"""The Analysis protocol (tracelens.engine.protocol): one analysis gives the same result on a trace
loaded in this process (run_trace) and on its files through the engine (engine.run), with
each host's part placed on the job's plan."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import polars as pl

import tracelens
from tracelens.engine.hosts import EngineOptions, run
from tracelens.core.model import Trace
from tracelens.engine.protocol import JobPlan, run_trace

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"


@dataclass(frozen=True)
class BusyPart:
    """Per (host, rank): kernel count and the last kernel end, as placed in the job."""

    per_rank: pl.DataFrame


class BusyPerRank:
    """A small analysis written on the protocol: what a test can check by hand."""

    def partial(self, trace: Trace, options: None) -> BusyPart:
        return BusyPart(trace.events.group_by("host", "rank").agg(
            kernels=pl.len(), start_ns=pl.col("start_ns").min(), end_ns=pl.col("end_ns").max()))

    def merge(self, parts: Sequence[BusyPart], plan: JobPlan) -> BusyPart:
        return BusyPart(plan.concat([p.per_rank for p in parts]))

    def finish(self, part: BusyPart, options: None) -> pl.DataFrame:
        return part.per_rank.sort("rank", "host")


def test_run_trace_and_engine_agree_on_a_multi_host_job(tmp_path: Path) -> None:
    files = [SAMPLES / "mi355x_2x8gpu_straggler"]  # two hosts, one file each
    here = run_trace(BusyPerRank(), tracelens.load(files), None)
    engine = run(BusyPerRank(), files, None, engine=EngineOptions(workers=1))
    assert here.equals(engine)
    assert here["kernels"].sum() == tracelens.load(files).events.height


def test_two_hosts_are_placed_on_distinct_ranks() -> None:
    out = run(BusyPerRank(), [SAMPLES / "mi355x_2x8gpu_straggler"], None,
              engine=EngineOptions(workers=1))
    assert out["host"].n_unique() == 2
    assert out["rank"].to_list() == [0, 1]  # XSpace: one rank per host file


class WholeJobBusy(BusyPerRank):
    """BusyPerRank on the job loaded whole, noting whether its trace is still alive when
    the finish runs."""

    def __init__(self) -> None:
        self.trace_ref: object = None
        self.alive_at_finish: list[bool] = []

    def whole_job(self, options: None) -> bool:
        return True

    def partial(self, trace: Trace, options: None) -> BusyPart:
        import weakref

        self.trace_ref = weakref.ref(trace)
        return super().partial(trace, options)

    def finish(self, part: BusyPart, options: None) -> pl.DataFrame:
        import gc

        gc.collect()
        self.alive_at_finish.append(self.trace_ref() is not None)  # type: ignore[operator]
        return super().finish(part, options)


def test_a_job_loaded_whole_lets_its_trace_go_before_the_last_finish() -> None:
    """``run`` (nothing reads the job again) lets the trace go once the partial is taken:
    a whole trace's events are not held while its critical path solves; ``run_tasks``
    keeps it by default, for later rounds (``run_again``). Same result both ways."""
    from tracelens.engine.hosts import LoadOptions, run_tasks
    from tracelens.engine.protocol import Task

    files = [SAMPLES / "mi355x_2x8gpu_straggler"]
    let_go, kept = WholeJobBusy(), WholeJobBusy()
    out = run(let_go, files, None, LoadOptions())
    (same,), job = run_tasks([Task(kept, None)], files, LoadOptions())
    assert let_go.alive_at_finish == [False] and kept.alive_at_finish == [True]
    assert job.trace is not None and out.equals(same)  # type: ignore[attr-defined]
    assert out.equals(run(BusyPerRank(), files, None, engine=EngineOptions(workers=1)))
