"""A run's profile (compare, scaling) from per-host partials in two rounds (issue 17) equals
``profile(load(files))``: every field, the kernel frame, and compare's JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from polars.testing import assert_frame_equal

from tests.test_collective_partials import STRAGGLER, TRACES, _job
from tracelens.analyze.communication.collective_parts import (
    collective_partial,
    merge_collective_partials,
)
from tracelens.analyze.runs.compare import compare
from tracelens.analyze.runs.profile_parts import match_job, profile_of_partials, profile_partial
from tracelens.analyze.runs.scaling import RunProfile, profile
from tracelens.loading.formats import discover
from tracelens.loading.loader import load

FIELDS = ("path", "devices", "hosts", "steps", "step_ns", "components", "busbw", "skew_ns",
          "stragglers", "per_device", "hlo_findings", "hardware", "warnings")


def _both(path: Path) -> tuple[RunProfile, RunProfile]:
    files, _ = discover(path)
    whole = profile(load(files), "run")
    traces = [load([f]) for f in files]
    merged = merge_collective_partials([collective_partial(t) for t in traces])
    job = match_job(merged)
    parts = [profile_partial(t, i, merged, job) for i, t in enumerate(traces)]
    return whole, profile_of_partials(parts, merged, job, "run")


def _assert_same(whole: RunProfile, mine: RunProfile) -> None:
    for f in FIELDS:
        assert getattr(mine, f) == getattr(whole, f), f
    assert_frame_equal(mine.kernels, whole.kernels)
    a = json.dumps(compare(whole, whole, 50))
    assert json.dumps(compare(whole, mine, 50)) == a and json.dumps(compare(mine, whole, 50)) == a


def test_straggler_sample_profile_from_partials() -> None:
    whole, mine = _both(STRAGGLER)
    _assert_same(whole, mine)
    assert whole.hosts == 2 and whole.hlo_findings  # the HLO lens ran on the partials too


def test_unaligned_job_profile_from_partials(tmp_path: Path) -> None:
    root = _job(tmp_path, {"nA": None, "nB": None, "nC": None},
                {"nA": 0, "nB": 7_000_000, "nC": 123_457})
    whole, mine = _both(root)
    _assert_same(whole, mine)
    # waits come from arrivals on other hosts: only the cross-host match gives them
    assert whole.components["straggler_wait:all-gather"] > 0


def test_duplicate_host_names_profile_from_partials(tmp_path: Path) -> None:
    t0 = 1_800_000_000_000_000_000
    root = _job(tmp_path, {"node#0": t0, "node#1": t0 + 40}, {"node#0": 0, "node#1": 0})
    whole, mine = _both(root)
    _assert_same(whole, mine)
    assert sorted(whole.per_device) == ["node#0/GPU0", "node#0/GPU1", "node#1/GPU0",
                                        "node#1/GPU1"]


@pytest.mark.parametrize("rel", ["kineto/sampled_128rank_job", "rocprof/counters_gfx1151"])
def test_real_multi_file_jobs_profile_from_partials(rel: str) -> None:
    path = TRACES / rel
    if not path.exists():
        pytest.skip(f"{path} not present")
    _assert_same(*_both(path))
