"""A folder of unrelated traces is refused with the jobs it holds; real single jobs are not."""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

import tracelens
from parsers import xspace as xspace_reader
from parsers.xplane_schema import xspace_class
from tracelens_dev.writers.rocprof import write_json, write_rocpd
from tracelens_dev.writers.xspace import Activity, build_xspace
from tests.conftest import SAMPLES, SHARED, cli
from tracelens.loading.devices import identify_devices
from tracelens.core.errors import TraceInputError
from tracelens.loading.jobs import check_one_job, facts

T0 = 1_800_000_000_000_000_000
MI300X = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"
H100 = SAMPLES / "h100_8gpu_moe_ddp.xplane.pb"
STRAGGLER = SAMPLES / "mi355x_2x8gpu_straggler"


def _host(host: str, start: int | None) -> bytes:
    acts = [Activity(d, 1, "Cijk_gemm.kd", 1_000, 500, {"hlo_op": "custom-call.1"})
            for d in range(2)]
    return build_xspace(acts, host=host, profile_start_ns=start)


def test_the_sample_folder_is_refused_with_its_jobs() -> None:
    """The samples folder holds many jobs (the bundled samples, the real TPU and XLA:CPU
    traces, the real counterfactual runs): one line lists them all, numbered, in path order."""
    import re

    res = cli("summarize", str(SAMPLES))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    jobs = re.findall(r"(?:\): |; )(\d+)\) ([^;]+?) \((\d+× [^)]+)\)", res.stderr)
    assert [int(n) for n, _, _ in jobs] == list(range(1, len(jobs) + 1))
    assert res.stderr.startswith(f"error: {SAMPLES}: holds {len(jobs)} jobs, not one (")
    assert res.stderr.endswith("; pass one job's files\n")
    listed = [(path, kind) for _, path, kind in jobs]
    expected = [
        ("h100_8gpu_moe_ddp.xplane.pb", "8× NVIDIA H100 SXM"),
        ("hlo/comm_types.xplane.pb", "8× CPU"), ("hlo/planted.xplane.pb", "8× CPU"),
        ("mi300x_8gpu_llama_step.xplane.pb", "8× AMD Instinct MI300X"),
        ("mi355x_2x8gpu_straggler/plugins/profile/2026_11_18_11_06_40/"
         "{mi355x-node0.xplane.pb, mi355x-node1.xplane.pb}", "16× AMD Instinct MI355X"),
        ("mi355x_8gpu_llama_fsdp.xplane.pb", "8× AMD Instinct MI355X"),
        ("tpu/eager_block.xplane.pb", "1× TPU v5 Lite"), ("tpu/flash.xplane.pb", "1× TPU v5 Lite"),
        ("tpu/multi.xplane.pb", "1× TPU v5 Lite"), ("tpu/remat.xplane.pb", "1× TPU v5 Lite"),
        ("tpu/sync.xplane.pb", "1× TPU v5 Lite")]
    assert [e for e in listed if e in expected] == expected  # each, in path order
    assert listed == sorted(listed)
    assert len(listed) > len(expected)  # and the real runs beside them


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
    part = xspace_reader.read(MI300X)
    identify_devices(part)  # as reading does for every file, before the job check
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
    for run, start in (("r1", T0), ("r2", T0 + 1)):  # not byte-identical (a copy is one file)
        (tmp_path / run).mkdir()
        (tmp_path / run / "a.xplane.pb").write_bytes(_host("nodeA", start))
    with pytest.raises(TraceInputError, match=r"holds 2 jobs.*1\) r1/a.xplane.pb .*2\) "
                                              r"r2/a.xplane.pb"):
        tracelens.load(tmp_path)
    # named one by one, the same two files are what the user says they are: one job
    assert tracelens.load([tmp_path / "r1" / "a.xplane.pb",
                           tmp_path / "r2" / "a.xplane.pb"]).devices.height == 4


JAX_2PROC = Path(__file__).resolve().parent / "data" / "jax_2proc"
KINETO_128 = SHARED / "traces" / "kineto" / "sampled_128rank_job"
HLO_PB = SAMPLES / "hlo" / "upcast_step.hlo.pb"


def _summary(paths: list[Path] | Path) -> dict:
    res = cli("summarize", "--format", "json", *map(str, paths if isinstance(paths, list)
                                                       else [paths]))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    out.pop("inputs")
    return out


def test_one_log_directory_per_process_is_one_job() -> None:
    """A real two-process jax.distributed job, each process profiling into its own log
    directory (same host name, same run folder name, same program): refused as "2 profile
    runs" before; now the same job as its two files named one by one."""
    files = sorted(JAX_2PROC.rglob("*.xplane.pb"))
    assert len(files) == 2 and files[0].parent.name == files[1].parent.name
    trace = tracelens.load(JAX_2PROC)
    assert trace.devices["host"].unique().sort().to_list() == ["vm#0", "vm#1"]
    assert trace.devices.height == 4
    # what tells the processes apart: the process_id plane stat, read here with protobuf
    pids = []
    for f in files:
        space = xspace_class()()
        space.ParseFromString(f.read_bytes())
        plane = next(p for p in space.planes if p.name == "/host:CPU")
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        pids += [s.int64_value or s.uint64_value for s in plane.stats
                 if names[s.metadata_id] == "process_id"]
    assert len(set(pids)) == 2
    assert sorted(xspace_reader.read(f).meta.hosts["vm"].pid for f in files) == sorted(pids)
    assert _summary(JAX_2PROC) == _summary(files)


def test_the_same_process_in_two_run_folders_is_one_file(tmp_path: Path) -> None:
    """A copy of one process's run (same host, process and window) is no second process:
    byte-identical, it is that one file, read once and said (it was refused as two jobs)."""
    run = next(JAX_2PROC.rglob("*.xplane.pb")).parent
    for name in ("2026_01_01_00_00_00", "2026_01_01_00_00_01"):
        shutil.copytree(run, tmp_path / "plugins" / "profile" / name)
    trace = tracelens.load(tmp_path)
    assert trace.devices.height == tracelens.load(run).devices.height
    assert any("byte-identical" in w for w in trace.meta.warnings)


def test_hosts_whose_run_folders_are_a_second_apart_are_one_job(tmp_path: Path) -> None:
    """Each host of a multi-host job names its run folder after its own clock: different
    hosts with a shared program and overlapping windows are one job; without the shared
    program, or on disjoint windows, they are not."""
    hlo = HLO_PB.read_bytes()
    acts = [Activity(d, 1, "Cijk_gemm.kd", 1_000, 500, {"hlo_op": "custom-call.1"})
            for d in range(2)]

    def write(folder: str, host: str, start: int, modules: list) -> None:
        d = tmp_path / folder / "plugins" / "profile" / f"2026_01_01_00_00_0{host[-1]}"
        d.mkdir(parents=True)
        (d / f"{host}.xplane.pb").write_bytes(build_xspace(
            acts, host=host, profile_start_ns=start, modules=modules))

    write("job", "node0", T0, [("jit_step(1)", hlo, 1)])
    write("job", "node1", T0 + 700, [("jit_step(1)", hlo, 1)])
    assert tracelens.load(tmp_path / "job").devices["host"].unique().sort().to_list() == \
        ["node0", "node1"]
    write("noprog", "node0", T0, [])
    write("noprog", "node1", T0 + 700, [])
    with pytest.raises(TraceInputError, match="holds 2 jobs"):
        tracelens.load(tmp_path / "noprog")
    write("apart", "node0", T0, [("jit_step(1)", hlo, 1)])
    write("apart", "node1", T0 + 3_600 * 10**9, [("jit_step(1)", hlo, 1)])
    with pytest.raises(TraceInputError, match="holds 2 jobs"):
        tracelens.load(tmp_path / "apart")


def test_kineto_ranks_in_their_own_folders_are_one_job(tmp_path: Path) -> None:
    """Ranks 0 and 1 of the real 128-rank job, each in a folder of its own, are the job they
    are in one folder; the same rank twice is not."""
    if not KINETO_128.exists():
        pytest.skip(f"real trace {KINETO_128} not present (shared/ is not beside this checkout)")
    for r in (0, 1):
        (tmp_path / "job" / f"rank{r}").mkdir(parents=True)
        shutil.copy(KINETO_128 / f"rank-{r}.json.gz", tmp_path / "job" / f"rank{r}")
    assert _summary(tmp_path / "job") == _summary(KINETO_128)
    for r in ("a", "b"):
        (tmp_path / "twice" / r).mkdir(parents=True)
        shutil.copy(KINETO_128 / "rank-0.json.gz", tmp_path / "twice" / r)
    twice = tracelens.load(tmp_path / "twice")  # byte-identical: one file, read once
    assert twice.devices.height == tracelens.load(KINETO_128 / "rank-0.json.gz").devices.height
    assert any("byte-identical" in w for w in twice.meta.warnings)


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
    second = write_rocpd(small, tmp_path / "one" / "2_results.db")[0]  # same host and times
    with sqlite3.connect(second) as con:  # another process (a copy is one file, read once)
        table = con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name "
                            "LIKE 'rocpd_info_process_%'").fetchone()[0]
        con.execute(f'UPDATE "{table}" SET pid = pid + 1')
    con.close()
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
