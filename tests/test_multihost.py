"""XProf log directories: several hosts of one run become one Trace on one clock."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl

import tracelens
from tracelens_dev.writers.xspace import Activity, build_xspace
from tracelens.core.model import validate

T0 = 1_800_000_000_000_000_000


def _host_trace(host: str, start_offset_ns: int | None) -> bytes:
    acts = [Activity(d, 1, "Cijk_Ailk_Bljk_BBS_BH_MT64x64x64.kd", 1_000 + 10 * d, 500,
                     {"hlo_op": "custom-call.1"}) for d in range(2)]
    acts += [Activity(d, 2, "ncclDevKernel_Generic_4(x)", 1_400, 300,
                      {"hlo_op": "all-reduce-start.1"}) for d in range(2)]
    return build_xspace(acts, host=host, steps=[(0, 900, 2_000)],
                        profile_start_ns=None if start_offset_ns is None
                        else T0 + start_offset_ns)


def _logdir(tmp_path: Path, offsets: dict[str, int | None], gz: bool = False) -> Path:
    run = tmp_path / "logs" / "plugins" / "profile" / "2026_11_29_10_00_00"
    run.mkdir(parents=True)
    for host, off in offsets.items():
        data = _host_trace(host, off)
        if gz:
            (run / f"{host}.xplane.pb.gz").write_bytes(gzip.compress(data))
        else:
            (run / f"{host}.xplane.pb").write_bytes(data)
    return tmp_path / "logs"


def test_two_hosts_one_trace_aligned_on_wall_clock(tmp_path: Path) -> None:
    trace = tracelens.load(_logdir(tmp_path, {"nodeA": 0, "nodeB": 250}))
    assert validate(trace) == []
    assert trace.meta.alignment.startswith("wall-clock")
    assert trace.devices.select("host", "rank").unique().sort("rank").rows() == [
        ("nodeA", 0), ("nodeB", 1)]
    # nodeB's profile started 250 ns later: its events and steps move 250 ns later.
    starts = trace.events.filter(pl.col("device") == 0).sort("rank", "start_ns") \
        .group_by("rank", maintain_order=True).agg(pl.col("start_ns").first())
    assert starts["start_ns"].to_list() == [1_000, 1_250]
    assert trace.steps.sort("rank")["start_ns"].to_list() == [900, 1_150]
    s = tracelens.summarize(trace)
    assert s["headline"]["hosts"] == 2 and len(s["devices"]) == 4
    assert all(d["steps"][0]["timeline"]["exposed_comm_ns"] == 200 - 10 * d["device"]
               for d in s["devices"])


def test_hosts_without_profile_start_fall_back_to_collective_ends(tmp_path: Path) -> None:
    trace = tracelens.load(_logdir(tmp_path, {"nodeA": None, "nodeB": 0}))
    assert trace.meta.alignment.startswith("collective ends")


def test_hosts_without_clock_or_shared_collectives_stay_unaligned(tmp_path: Path) -> None:
    run = tmp_path / "plugins" / "profile" / "r"
    run.mkdir(parents=True)
    for host in ("nodeA", "nodeB"):
        acts = [Activity(0, 1, "loop_add_fusion.kd", 1_000, 500, {"hlo_op": "loop_add_fusion"})]
        (run / f"{host}.xplane.pb").write_bytes(build_xspace(acts, host=host,
                                                             profile_start_ns=None))
    trace = tracelens.load(tmp_path)
    assert trace.meta.alignment == "none"
    assert any("could not be aligned" in w for w in trace.meta.warnings)


def test_gzipped_files(tmp_path: Path) -> None:
    trace = tracelens.load(_logdir(tmp_path, {"nodeA": 0}, gz=True))
    assert trace.events.height == 4 and trace.meta.sources[0]["format"] == "xspace"


def test_headline_counts_steps_not_rank_step_pairs(tmp_path: Path) -> None:
    import tracelens

    s = tracelens.summarize(tracelens.load(_logdir(tmp_path, {"nodeA": 0, "nodeB": 250})))
    assert s["headline"]["steps"] == 1
