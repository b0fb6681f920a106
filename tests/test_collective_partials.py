"""Collectives from per-host partials (issue 17) equal collectives of the whole job, byte for
byte; and the typed result (issue 14) is what the JSON rounds."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import polars as pl
import pytest

from tracelens_dev.writers.xspace import Activity, build_xspace
from tracelens.loading.align import collective_end_offsets, offsets_from_activities
from tracelens.analyze.communication.collective_parts import (
    collective_partial, collectives_of_partials,
                                                   merge_collective_partials)
from tracelens.analyze.communication.collectives import (analyze, collective_activities,
                                           link_of)
from tracelens.loading.formats import discover
from tracelens.loading.loader import load
from tracelens.results.encode import encode, to_json

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces"
STRAGGLER = ROOT / "sample_traces" / "mi355x_2x8gpu_straggler"


def _whole_and_merged(path: Path, top: int = 10) -> tuple[str, str, str]:
    """(JSON of load(files), JSON of the merged per-host partials, the job's alignment)."""
    files, _ = discover(path)
    whole = load(files)
    a = analyze(whole.events, whole.meta.alignment, top, link_of(whole.devices))
    b = collectives_of_partials([collective_partial(load([f])) for f in files], top)
    return to_json(a), to_json(b), whole.meta.alignment


def _job(tmp_path: Path, skews: dict[str, int | None], clock: dict[str, int]) -> Path:
    """Hosts of two GPUs each running 4 all-reduces and 3 all-gathers (one op each), with a
    GEMM hiding part of each; ``skews``: the profile start (None: unknown) per host file
    name, ``clock``: ns added to all of that host's times (its clock's offset)."""
    run = tmp_path / "plugins" / "profile" / "r"
    run.mkdir(parents=True)
    for i, (name, start) in enumerate(skews.items()):
        off = clock[name]
        acts = []
        for d in range(2):
            late = 37 * i + 11 * d  # a different arrival per host and device
            for k in range(4):
                t = off + 10_000 * k
                acts.append(Activity(d, 1, "Cijk_Ailk_Bljk_BBS_BH_MT64x64x64.kd", t, 600,
                                     {"hlo_op": "custom-call.1"}))
                acts.append(Activity(d, 2, "ncclDevKernel_Generic_4(x)", t + 400 + late,
                                     900 - late, {"hlo_op": "all-reduce-start.1"}))
                if k < 3:
                    acts.append(Activity(d, 2, "ncclDevKernel_AllGather(x)",
                                         t + 3_000 + 2 * late, 500 - late,
                                         {"hlo_op": "all-gather-start.2"}))
        host = name.split("#")[0]
        (run / f"{name.replace('#', '_')}.xplane.pb").write_bytes(build_xspace(
            acts, host=host, steps=[(0, off, off + 40_000)], profile_start_ns=start))
    return tmp_path


def test_straggler_sample_partials_equal_the_whole() -> None:
    a, b, alignment = _whole_and_merged(STRAGGLER)
    assert alignment.startswith("wall-clock")
    assert a == b


def test_wall_clock_shift_applies_to_partials(tmp_path: Path) -> None:
    t0 = 1_800_000_000_000_000_000
    root = _job(tmp_path, {"nA": t0, "nB": t0 + 250, "nC": t0 - 90},
                {"nA": 0, "nB": 0, "nC": 0})
    a, b, alignment = _whole_and_merged(root)
    assert alignment.startswith("wall-clock") and a == b
    assert json.loads(a)["worst_instances"][0]["arrival_skew_ns"] > 250  # shifts were applied


def test_unaligned_hosts_align_on_collective_ends_from_partials(tmp_path: Path) -> None:
    root = _job(tmp_path, {"nA": None, "nB": None, "nC": None},
                {"nA": 0, "nB": 7_000_000, "nC": 123_457})
    a, b, alignment = _whole_and_merged(root)
    assert alignment.startswith("collective ends") and a == b
    # without the alignment, the hosts' clocks (ms apart) would be the arrival skew
    assert json.loads(b)["worst_instances"][0]["arrival_skew_ns"] < 1_000


def test_duplicate_host_names_become_numbered_in_partials(tmp_path: Path) -> None:
    t0 = 1_800_000_000_000_000_000
    root = _job(tmp_path, {"node#0": t0, "node#1": t0 + 40}, {"node#0": 0, "node#1": 0})
    files, _ = discover(root)
    merged = merge_collective_partials([collective_partial(load([f])) for f in files])
    assert sorted(merged.acts["host"].unique().to_list()) == ["node#0", "node#1"]
    assert merged.acts.select("host", "rank").unique().sort("rank").rows() == [
        ("node#0", 0), ("node#1", 1)]
    a, b, _ = _whole_and_merged(root)
    assert a == b


@pytest.mark.parametrize("rel", ["kineto/sampled_128rank_job", "rocprof/counters_gfx1151"])
def test_real_multi_file_jobs_partials_equal_the_whole(rel: str) -> None:
    path = TRACES / rel
    if not path.exists():
        pytest.skip(f"{path} not present")
    a, b, _ = _whole_and_merged(path)
    assert a == b


def test_offsets_from_activities_equal_those_from_events(tmp_path: Path) -> None:
    root = _job(tmp_path, {"nA": None, "nB": None}, {"nA": 0, "nB": 5_000_000})
    files, _ = discover(root)
    # load one host at a time so the clocks stay apart, then put them in one frame
    ev = pl.concat([load([f]).events.with_columns(rank=pl.lit(i, pl.Int32))
                    for i, f in enumerate(files)])
    want = collective_end_offsets(ev)
    assert want == offsets_from_activities(collective_activities(ev))
    assert want["nA"] == (0, 7) and abs(want["nB"][0] + 5_000_000) < 100


def test_typed_result_is_frozen_unrounded_and_rounded_only_in_json() -> None:
    whole = load(STRAGGLER)
    c = analyze(whole.events, whole.meta.alignment, 3, link_gb_per_s=400.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.instances = 0  # type: ignore[misc]
    j = encode(c)
    assert list(j) == ["by_type", "collectives", "worst_instances", "stragglers", "alignment",
                       "instances", "link_gb_per_s", "link_unidirectional_gb_per_s", "mesh",
                       "axes", "unmapped", "warnings"]
    assert len(c.worst) == 3 and c.instances > 3
    assert c.link_unidirectional_gb_per_s == 200.0
    for row, typed in zip(j["by_type"], c.by_type):
        assert row["busbw_gb_per_s"] == round(typed.busbw.median, 3)
        assert row["busbw_link_pct"] == round(100 * typed.busbw.median / 200.0, 1)
    assert any(t.busbw.median != round(t.busbw.median, 3) for t in c.by_type)
