"""A folder of unrelated traces is refused with the jobs it holds; real single jobs are not."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

import tracelens
from parsers import xprof
from tracelens_dev.writers.rocprof import write_json, write_rocpd
from tracelens_dev.writers.xspace import Activity, build_xspace
from tests.conftest import SAMPLES, cli
from tracelens.errors import TraceInputError
from tracelens.jobs import check_one_job, facts

T0 = 1_800_000_000_000_000_000
MI300X = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"
H100 = SAMPLES / "h100_8gpu_moe_ddp.xplane.pb"
STRAGGLER = SAMPLES / "mi355x_2x8gpu_straggler"


def _host(host: str, start: int | None) -> bytes:
    acts = [Activity(d, 1, "Cijk_gemm.kd", 1_000, 500, {"hlo_op": "custom-call.1"})
            for d in range(2)]
    return build_xspace(acts, host=host, profile_start_ns=start)


def test_the_sample_folder_is_refused_with_its_jobs() -> None:
    res = cli("summarize", str(SAMPLES))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith(f"error: {SAMPLES}: holds 5 jobs, not one (")
    assert ("1) h100_8gpu_moe_ddp.xplane.pb (8× NVIDIA H100 SXM); "
            "2) hlo/planted.xplane.pb (8× CPU); "
            "3) mi300x_8gpu_llama_step.xplane.pb (8× AMD Instinct MI300X); "
            "4) mi355x_2x8gpu_straggler/plugins/profile/2026_11_18_11_06_40/"
            "{mi355x-node0.xplane.pb, mi355x-node1.xplane.pb} (16× AMD Instinct MI355X); "
            "5) mi355x_8gpu_llama_fsdp.xplane.pb (8× AMD Instinct MI355X); pass one job's "
            "files\n") in res.stderr


def test_different_device_kinds_in_one_folder_are_two_jobs(tmp_path: Path) -> None:
    for f in (MI300X, H100):
        shutil.copy(f, tmp_path / f.name)
    with pytest.raises(TraceInputError, match="holds 2 jobs"):
        tracelens.load(tmp_path)
    with pytest.raises(TraceInputError, match="holds 2 jobs"):  # also named one by one
        tracelens.load([MI300X, H100])


def test_same_program_on_different_device_kinds_is_one_job() -> None:
    """A job mixing device kinds is accepted when the files share a program (module and
    identical HLO); only the device kind differs here."""
    part = xprof.read(MI300X)
    other = replace(facts(part, Path("b"), 0, False), kinds=frozenset({"NVIDIA H100 SXM"}))
    check_one_job([facts(part, Path("a"), 0, False), other], [Path("x")])
    unrelated = replace(other, programs=frozenset())
    with pytest.raises(TraceInputError, match="holds 2 jobs"):
        check_one_job([facts(part, Path("a"), 0, False), unrelated], [Path("x")])


def test_disjoint_wall_clock_windows_are_two_jobs(tmp_path: Path) -> None:
    (tmp_path / "a.xplane.pb").write_bytes(_host("nodeA", T0))
    (tmp_path / "b.xplane.pb").write_bytes(_host("nodeB", T0 + 3_600 * 10**9))
    res = cli("summarize", str(tmp_path))
    assert res.returncode == 2
    assert res.stderr == (f"error: {tmp_path}: holds 2 jobs, not one (different run folders, "
                          "device kinds without a shared program, or disjoint time windows): "
                          "1) a.xplane.pb (2× AMD Instinct MI300X); 2) b.xplane.pb "
                          "(2× AMD Instinct MI300X); pass one job's files\n")


def test_hosts_of_one_job_are_accepted(tmp_path: Path) -> None:
    """Overlapping windows, and hosts without a profile start (nothing to compare)."""
    (tmp_path / "a.xplane.pb").write_bytes(_host("nodeA", T0))
    (tmp_path / "b.xplane.pb").write_bytes(_host("nodeB", T0 + 700))
    (tmp_path / "c.xplane.pb").write_bytes(_host("nodeC", None))
    trace = tracelens.load(tmp_path)
    assert trace.devices["host"].unique().sort().to_list() == ["nodeA", "nodeB", "nodeC"]
    both = tracelens.load(STRAGGLER)
    assert both.devices.height == 16


def test_several_run_folders_are_several_jobs(tmp_path: Path) -> None:
    for run in ("r1", "r2"):
        (tmp_path / run).mkdir()
        (tmp_path / run / "a.xplane.pb").write_bytes(_host("nodeA", T0))
    with pytest.raises(TraceInputError, match=r"holds 2 jobs.*1\) r1/a.xplane.pb .*2\) "
                                              r"r2/a.xplane.pb"):
        tracelens.load(tmp_path)
    # named one by one, the same two files are what the user says they are: one job
    assert tracelens.load([tmp_path / "r1" / "a.xplane.pb",
                           tmp_path / "r2" / "a.xplane.pb"]).devices.height == 4


@pytest.fixture(scope="module")
def small() -> tracelens.Trace:
    trace = tracelens.load(MI300X)
    trace.events = trace.events.head(60)
    return trace


def test_rocprof_processes_and_hosts_of_one_job_are_accepted(small: tracelens.Trace,
                                                             tmp_path: Path) -> None:
    two = tracelens.load(STRAGGLER)
    paths = write_rocpd(two, tmp_path / "out")  # out/<host>/<pid>_results.db
    assert len({p.parent for p in paths}) == 2
    assert tracelens.load(tmp_path / "out").devices["host"].n_unique() == 2
    write_rocpd(small, tmp_path / "one" / "1_results.db")
    write_rocpd(small, tmp_path / "one" / "2_results.db")  # same host, same times
    assert tracelens.load(tmp_path / "one").devices["rank"].n_unique() == 2


def test_rocprof_processes_at_different_times_are_two_jobs(small: tracelens.Trace,
                                                           tmp_path: Path) -> None:
    write_rocpd(small, tmp_path / "1_results.db")
    shift = pl.col("start_ns", "end_ns") + 10**10
    later = tracelens.Trace(small.events.with_columns(shift), small.host_events.head(0),
                            small.steps.with_columns(shift), small.devices, small.meta,
                            small.modules)
    write_rocpd(later, tmp_path / "2_results.db")
    with pytest.raises(TraceInputError, match=r"holds 2 jobs.*1\) 1_results.db .*2\) "
                                              r"2_results.db"):
        tracelens.load(tmp_path)


def test_one_rocprof_run_in_several_formats_says_which_was_read(small: tracelens.Trace,
                                                                tmp_path: Path) -> None:
    write_rocpd(small, tmp_path / "7_results.db")
    write_json(small, tmp_path / "7_results.json")
    trace = tracelens.load(tmp_path)
    assert [s["format"] for s in trace.meta.sources] == ["rocpd"]
    assert f"{tmp_path}: read 7_results.db; the same rocprofv3 run is also there as " \
           "7_results.json (not read)" in trace.meta.warnings
