"""The engine (issue 17): the per-host map and the reduce give the same job in this process
and on a Dask cluster; input errors from a worker arrive with their path.

One module-scoped LocalCluster of 2 worker processes serves every test (``--scheduler`` /
``scheduler=``); one test starts the embedded cluster of ``--workers 2`` itself.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import sys
from pathlib import Path

import polars as pl
import pytest

from tracelens.engine.cluster import local_cluster, run_map
from tracelens.engine.hosts import HostFile, MapOptions, map_host, run_hosts
from tracelens.analyze.communication.collective_parts import CollectivesAnalysis, CollectivesOptions
from tracelens.engine.protocol import Task
from tracelens.core.errors import TraceInputError
from tracelens.loading.loader import load

# a hung cluster test fails with every thread's stack instead of hanging CI (issue 25 D14);
# the thread method: Dask's threads keep a signal from reaching a blocked main thread
pytestmark = pytest.mark.timeout(300, method="thread")

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
STRAGGLER = SAMPLES / "mi355x_2x8gpu_straggler"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A 2-process LocalCluster for the module; its address is what ``--scheduler`` takes."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not import it
    with local_cluster(2, str(tmp_path_factory.mktemp("dask"))) as c:
        yield c.scheduler_address


@pytest.fixture(scope="module")
def job16(tmp_path_factory):
    """A 16-host job (2 GPUs each) drawn from a seed: MoE or not, straggler or not, overlap.
    CI draws the fixed seed 30459 (MoE, a straggler, 0.9 overlap: the draw that once broke
    the engine's summary), so a run is reproducible; ``TRACELENS_TEST_SEED=random`` draws a
    new job, any number replays one. The draw is printed so a failure can be replayed."""
    from tracelens_dev.writers.xspace import write
    from tracelens_dev.synth import Scenario, build
    from tracelens_dev.synth.scenario import Straggler

    asked = os.environ.get("TRACELENS_TEST_SEED", "30459")
    seed = random.SystemRandom().randrange(1 << 16) if asked == "random" else int(asked)
    rng = random.Random(seed)
    sc = Scenario(hosts=16, gpus=2, layers=2, steps=2, seed=seed, moe=rng.random() < 0.5,
                  overlap=rng.choice([0.0, 0.5, 0.9]),
                  straggler=Straggler(host=rng.randrange(16), device=0, slowdown=1.5)
                  if rng.random() < 0.5 else None)
    print(f"job16: TRACELENS_TEST_SEED={seed} {sc}")
    root = tmp_path_factory.mktemp("job16") / "logs"
    write(build(sc, truth=False).trace, root)
    return root


@pytest.fixture(scope="module")
def loaded():
    """``load([path])`` of a job, read once for the module: the one-process reference
    several tests compare with (nothing here changes a loaded trace)."""
    cache: dict[Path, object] = {}

    def get(path: Path):
        if path not in cache:
            cache[path] = load([path])
        return cache[path]
    return get


def _straggler_copy(tmp_path: Path) -> Path:
    """The 2-host sample copied into ``tmp_path`` (a log directory): its run folder."""
    run = tmp_path / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    for src in sorted((STRAGGLER / "plugins" / "profile").glob("*/*.xplane.pb")):
        (run / src.name).write_bytes(src.read_bytes())
    return run


def _pid_square(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _fail_on_odd(x: int) -> int:
    if x % 2:
        raise TraceInputError(f"/no/such/file{x}", "broken on purpose")
    return x


def test_trace_input_error_pickles_with_its_path() -> None:
    exc = pickle.loads(pickle.dumps(TraceInputError("/a/host1.xplane.pb", "truncated")))
    assert (exc.path, exc.problem) == ("/a/host1.xplane.pb", "truncated")


def test_run_map_keeps_input_order_on_workers(cluster: str) -> None:
    items = list(range(40, 0, -1))
    first = run_map(_pid_square, items, scheduler=cluster)
    assert [r for r, _ in first] == [x * x for x in items]
    assert {pid for _, pid in first} - {os.getpid()}  # it did run elsewhere
    assert [r for r, _ in run_map(_pid_square, items, scheduler=cluster)] == \
        [r for r, _ in first]


def _allocator_env() -> tuple[str | None, str | None]:
    return os.environ.get("POLARS_MAX_THREADS"), os.environ.get("_RJEM_MALLOC_CONF")


def _arenas(conf: str | None) -> str | None:
    """The arena count jemalloc reads from ``conf`` (the last one given), if any."""
    return conf.split("narenas:")[-1].split(",")[0] if conf and "narenas:" in conf else None


def test_local_workers_get_an_arena_per_polars_thread(cluster: str) -> None:
    """Each worker of the local cluster runs polars on its share of the cores, and its
    allocator with the arena count dask_map.worker_env gives (as many arenas as those
    threads, unless this process's options already name a count): the setting reaches the
    worker processes, before polars there reads it."""
    from distributed import Client

    from tracelens.engine.cluster import worker_env

    threads = max(1, (os.cpu_count() or 1) // 2)
    want = worker_env(threads)
    assert _arenas(want["_RJEM_MALLOC_CONF"]) is not None
    with Client(cluster, set_as_default=False) as client:
        got = client.run(_allocator_env)
    assert len(got) == 2, got
    for polars_threads, conf in got.values():
        assert polars_threads == str(threads)
        # polars puts its own options first in each process; the last arena count wins
        assert _arenas(conf) == _arenas(want["_RJEM_MALLOC_CONF"]), conf


def test_worker_env_keeps_the_allocator_options_already_set(monkeypatch) -> None:
    from tracelens.engine.cluster import worker_env

    monkeypatch.delenv("_RJEM_MALLOC_CONF", raising=False)
    assert worker_env(3) == {"POLARS_MAX_THREADS": "3", "_RJEM_MALLOC_CONF": "narenas:3"}
    monkeypatch.setenv("_RJEM_MALLOC_CONF", "dirty_decay_ms:500")
    assert worker_env(3)["_RJEM_MALLOC_CONF"] == "dirty_decay_ms:500,narenas:3"
    monkeypatch.setenv("_RJEM_MALLOC_CONF", "dirty_decay_ms:500,narenas:7")  # the caller's
    assert worker_env(3)["_RJEM_MALLOC_CONF"] == "dirty_decay_ms:500,narenas:7"


def test_run_map_in_process_for_one_worker() -> None:
    got = run_map(_pid_square, [3, 1, 2], workers=1)
    assert got == [(9, os.getpid()), (1, os.getpid()), (4, os.getpid())]


def test_first_input_error_in_input_order_with_its_path(cluster: str) -> None:
    with pytest.raises(TraceInputError) as info:
        run_map(_fail_on_odd, [2, 4, 7, 8, 3], scheduler=cluster)
    assert (info.value.path, info.value.problem) == ("/no/such/file7", "broken on purpose")
    with pytest.raises(TraceInputError) as local:
        run_map(_fail_on_odd, [2, 4, 7, 8, 3], workers=1)
    assert local.value.path == info.value.path


def test_embedded_local_cluster_leaves_nothing_behind(tmp_path: Path, monkeypatch) -> None:
    """Neither in the working folder nor in the temporary one (Dask's own lock files
    included)."""
    import tempfile

    work, temp = tmp_path / "work", tmp_path / "temp"
    work.mkdir()
    temp.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    got = run_map(_pid_square, [1, 2, 3, 4], workers=2)
    assert [r for r, _ in got] == [1, 4, 9, 16]
    assert os.getpid() not in {pid for _, pid in got}
    assert list(work.iterdir()) == [] and list(temp.iterdir()) == []


def test_unreadable_host_file_fails_with_its_path_from_a_worker(tmp_path: Path,
                                                                cluster: str) -> None:
    run = _straggler_copy(tmp_path)
    bad = run / "mi355x-node1.xplane.pb"
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    with pytest.raises(TraceInputError) as local:
        load([tmp_path])
    with pytest.raises(TraceInputError) as remote:
        run_hosts([tmp_path], MapOptions(tasks=(Task(CollectivesAnalysis(),
                                                     CollectivesOptions()),)),
                  scheduler=cluster)
    assert remote.value.path == local.value.path == str(bad)
    assert remote.value.problem == local.value.problem


def test_unrelated_files_refused_as_the_loader_refuses_them(cluster: str) -> None:
    paths = [SAMPLES / "h100_8gpu_moe_ddp.xplane.pb", SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"]
    with pytest.raises(TraceInputError) as local:
        load(paths)
    with pytest.raises(TraceInputError) as remote:
        run_hosts(paths, MapOptions(), scheduler=cluster)
    assert "holds 2 jobs" in remote.value.problem
    assert (remote.value.path, remote.value.problem) == (local.value.path, local.value.problem)


@pytest.mark.parametrize("which", ["straggler", "job16"])
def test_hosts_placed_as_the_one_process_loader_places_them(which: str, cluster: str,
                                                            request, loaded) -> None:
    """The reduce builds the job's metadata (hosts, ranks, sources, alignment, decoders)
    from the hosts' metadata alone as the one-process loader builds it, on either engine."""
    path = STRAGGLER if which == "straggler" else request.getfixturevalue("job16")
    whole = loaded(path)
    for kw in ({"workers": 1}, {"scheduler": cluster}):
        job = run_hosts([path], MapOptions(), **kw)
        assert job.meta.hosts == whole.meta.hosts and job.meta.ranks == whole.meta.ranks
        assert job.meta.sources == whole.meta.sources
        assert job.meta.alignment == whole.meta.alignment
        assert job.meta.format_facts == whole.meta.format_facts
        assert sorted({d for h in job.hosts for d in h.devices}) == \
            sorted(set(whole.devices["device"].to_list()))
        assert sorted({s for h in job.hosts for s in h.steps}) == \
            sorted(set(whole.steps["step"].to_list()))


def _frames(x: object) -> list[pl.DataFrame]:
    """Every DataFrame inside a partial (dataclasses, tuples, dicts)."""
    import dataclasses

    if isinstance(x, pl.DataFrame):
        return [x]
    if dataclasses.is_dataclass(x):
        return [f for fld in dataclasses.fields(x) for f in _frames(getattr(x, fld.name))]
    if isinstance(x, (list, tuple)):
        return [f for v in x for f in _frames(v)]
    if isinstance(x, dict):
        return [f for v in x.values() for f in _frames(v)]
    return []


def test_map_host_sends_back_no_event_frames() -> None:
    """What a host sends back holds no frame of its events: per-group sums, its collective
    rows (which instances match across hosts), each a fraction of them, and the critical
    path's graph of one step window (the activities in that window only) and the consistency
    gate's facts of that window (a few rows a device, and its collective activities)."""
    f = next((STRAGGLER / "plugins" / "profile").glob("*/mi355x-node0.xplane.pb"))
    from tracelens.analyze.summary.types import SummaryOptions

    from tracelens.analyze.summary.build import SummaryAnalysis

    part = map_host(HostFile(f), MapOptions(tasks=(
        Task(SummaryAnalysis(), SummaryOptions()),
        Task(CollectivesAnalysis(), CollectivesOptions()))))
    whole = load([f])
    summary, critical, facts = part.parts[0]
    frames = _frames((part.meta, summary, part.parts[1], part.ends, part.active, facts))
    collective = whole.events.filter(pl.col("category") == "collective").height
    assert part.parts[1].acts.height == collective
    assert frames and max(df.height for df in frames) * 3 < whole.events.height
    (lo, hi), = critical.windows.select("start_ns", "end_ns").unique().rows()
    nodes = critical.unpacked().nodes  # packed to travel
    assert isinstance(nodes, pl.DataFrame) and nodes.height
    assert nodes.filter((pl.col("end_ns") <= lo) | (pl.col("start_ns") >= hi)).is_empty()
    assert facts.devices.height == whole.devices.filter(pl.col("host") == "mi355x-node0").height
    assert facts.arrivals.height < collective


# -- the commands on the engine: byte-identical wherever the map runs ---------------------------

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "traces"
MULTI = {"straggler": STRAGGLER, "rocprof-counters": SHARED / "rocprof" / "counters_gfx1151",
         "kineto-128rank": SHARED / "kineto" / "sampled_128rank_job"}


def _cli(*argv: str) -> str:
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    res = CliRunner().invoke(main, list(argv))
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.parametrize("name", [*MULTI, "job16"])
def test_commands_byte_identical_in_process_and_on_a_cluster(name: str, cluster: str,
                                                             request) -> None:
    path = request.getfixturevalue("job16") if name == "job16" else MULTI[name]
    if not path.exists():
        pytest.skip(f"{path} not present")
    variants = [("summarize", "--format", "json"), ("collectives", "--format", "json")]
    if name in ("straggler", "job16"):  # XSpace: with HLO
        variants.append(("hlo", "--format", "json"))
    if name == "straggler":
        variants += [("summarize", "--format", "csv"),
                     ("summarize", "--format", "json", "--step", "1", "--device", "1"),
                     ("collectives", "--format", "json", "--category", "collective")]
    for argv in variants:
        here = _cli(*argv, str(path), "--quiet", "--workers", "1")
        there = _cli(*argv, str(path), "--quiet", "--scheduler", cluster)
        assert here == there, argv


def test_engine_summary_equals_the_one_process_summary(job16: Path, loaded) -> None:
    """The random 16-host job through the per-host map and reduce gives the summary and the
    HLO lens of the whole job loaded in one process, byte for byte."""
    from reports import summary as render
    from tracelens.analyze.compute.hlo_findings import lens_trace
    from tracelens.analyze.summary.build import summarize
    from tracelens.results.encode import to_json

    trace = loaded(job16)
    whole = render.render_json(summarize(trace))
    assert _cli("summarize", str(job16), "--format", "json", "--quiet") == whole + "\n"
    lens = to_json(lens_trace(trace).top(20))
    assert _cli("hlo", str(job16), "--format", "json", "--quiet") == lens + "\n"


def test_bad_host_file_exits_2_with_its_path_from_the_cluster(tmp_path: Path,
                                                              cluster: str) -> None:
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    run = _straggler_copy(tmp_path)
    bad = run / "mi355x-node0.xplane.pb"
    bad.write_bytes(b"\x0a\xff\xff\xff\x0f" + bad.read_bytes()[:100])
    res = CliRunner().invoke(main, ["summarize", str(tmp_path), "--scheduler", cluster])
    assert res.exit_code == 2
    assert res.stderr.startswith(f"error: {bad}: ") and res.stderr.count("\n") == 1


@pytest.mark.parametrize("starts", [(None, None), (1_795_000_000_000_000_000, None)],
                         ids=["no-wall-clock", "mixed"])
def test_hosts_aligned_on_collective_ends_as_in_one_process(tmp_path: Path, starts,
                                                            tmp_path_factory) -> None:
    """Hosts without a shared wall clock (none has a profile start, or only one has) are
    aligned on collective ends from the ends the hosts send (read again from a host that
    had a start and did not send them) as the one-process loader aligns them; ``report``'s
    step timeline is drawn in the aligned time, with steps and without."""
    from reports import summary as render
    from tests.synth_helpers import write_skewed_hosts
    from tracelens.analyze.summary.build import summarize

    write_skewed_hosts(tmp_path, starts)
    whole = load([tmp_path])
    assert whole.meta.alignment.startswith("collective ends")
    assert _cli("summarize", str(tmp_path), "--format", "json", "--quiet") == \
        render.render_json(summarize(whole)) + "\n"
    got = json.loads(_cli("collectives", str(tmp_path), "--format", "json", "--quiet"))
    # a host filter keeps the one-process path: every host kept, the same numbers
    one = json.loads(_cli("collectives", str(tmp_path), "--format", "json", "--quiet",
                          "--host", "n0", "--host", "n1"))
    assert one.pop("filters") == {"host": ["n0", "n1"]}
    assert got == one and got["alignment"].startswith("collective ends")
    out = tmp_path_factory.mktemp("page")
    for marker in (None, "no such marker"):
        argv = ("--step-marker", marker) if marker else ()
        assert _report_page(tmp_path, out, *argv) == _report_loaded(tmp_path,
                                                                    step_marker=marker)


def _die_once(marker: str) -> int:
    """Kill its worker process the first time (as an out-of-memory kill would)."""
    if not Path(marker).exists():
        Path(marker).write_text("died once")
        os._exit(1)
    return 7


def _always_die(path: str) -> int:
    os._exit(1)


def test_a_dead_worker_is_retried(tmp_path: Path, cluster: str) -> None:
    assert run_map(_die_once, [str(tmp_path / "marker"), str(tmp_path / "marker")],
                   scheduler=cluster) == [7, 7]


def test_a_file_that_kills_every_worker_fails_with_its_path(cluster: str) -> None:
    with pytest.raises(TraceInputError) as info:
        run_map(_always_die, ["/data/host7.xplane.pb"], scheduler=cluster, retries=0)
    assert info.value.path == "/data/host7.xplane.pb"
    assert info.value.problem.startswith("its worker died on every try")


def test_unreachable_scheduler_is_one_error_line() -> None:
    import dask
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        res = CliRunner().invoke(main, ["collectives", str(STRAGGLER), "--scheduler",
                                        "tcp://127.0.0.1:9"])
    assert res.exit_code == 2
    assert res.stderr.startswith("error: tcp://127.0.0.1:9: cannot reach the Dask scheduler")


def test_discovery_notes_reach_the_output_as_in_one_process(tmp_path: Path) -> None:
    """A folder whose second rocprofv3 process is also there in another format: the note
    that says which file was read is in the summary, which equals the one-process one."""
    from reports import summary as render
    from tracelens.analyze.summary.build import summarize

    src = SHARED / "rocprof" / "mi350x_908_results.json.gz"
    if not src.exists():
        pytest.skip(f"{src} not present")
    for name in ("908_results.json.gz", "909_results.json.gz"):
        (tmp_path / name).write_bytes(src.read_bytes())
    (tmp_path / "909_kernel_trace.csv").write_text("not read\n")
    whole = load([tmp_path])
    assert any("(not read)" in w for w in whole.meta.warnings)
    assert _cli("summarize", str(tmp_path), "--format", "json", "--quiet") == \
        render.render_json(summarize(whole)) + "\n"


def test_engine_workers_decides_where_the_map_runs(tmp_path: Path, monkeypatch) -> None:
    import tracelens.engine.hosts as engine

    files = [HostFile(tmp_path / f"h{i}.xplane.pb") for i in range(4)]
    for f in files:
        f.path.write_bytes(b"x" * 10)
    monkeypatch.delenv("TRACELENS_WORKERS", raising=False)
    monkeypatch.delenv("TRACELENS_SCHEDULER", raising=False)
    assert engine.engine_workers(files, None, None) == 1  # 40 bytes: not worth a cluster
    assert engine.engine_workers(files, 2, None) == 2
    assert engine.engine_workers(files[:1], 8, None) == 1
    monkeypatch.setattr(engine, "LOCAL_MIN_BYTES", 20)
    monkeypatch.setenv("TRACELENS_WORKERS", "3")
    assert engine.engine_workers(files, None, None) == 3
    assert engine.engine_workers(files[:2], None, None) == 2


def test_sigterm_tears_the_local_cluster_down(job16: Path, tmp_path: Path) -> None:
    """A command stopped while its local cluster runs leaves no worker process and no
    scratch folder behind (SIGTERM unwinds as Ctrl-C does)."""
    import signal
    import subprocess
    import time

    import psutil

    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(Path(__file__).parents[1])}
    proc = subprocess.Popen([sys.executable, "-m", "tracelens.cli", "summarize", str(job16),
                             "--workers", "2", "--format", "json"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    me = psutil.Process(proc.pid)
    children: list[psutil.Process] = []
    deadline = time.monotonic() + 120  # a guard against a hang, not a measured time
    while proc.poll() is None and time.monotonic() < deadline and len(children) < 2:
        children = [c for c in me.children(recursive=True) if "spawn_main" in " ".join(
            c.cmdline())] if me.is_running() else []
        time.sleep(0.1)
    assert proc.poll() is None, "finished before its workers were seen"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) != 0
    _, alive = psutil.wait_procs(children, timeout=60)
    assert alive == [] and not list(tmp_path.glob("tracelens-dask-*"))


# -- compare and scaling: each run's profile in two rounds of per-host maps ---------------------

def _loaded_profiles(paths, filters=None, load_options=None, engine=None, extra=()):
    """The one-process path the engine replaces: each run loaded whole, filtered, profiled
    (and ``extra``'s analyses, compare's summaries, on the same trace)."""
    from tracelens.analyze.runs.scaling import profile
    from tracelens.loading.filters import apply
    from tracelens.engine.protocol import run_trace

    out = []
    for path in paths:
        whole = load([path], rules=load_options.rules, step_marker=load_options.step_marker)
        trace = apply(whole, filters) if filters is not None and filters.active() else whole
        out.append((profile(trace, str(path)), trace.meta.steps_source,
                    *[run_trace(t.analysis, whole, t.options) for t in extra]))
    return out


def test_compare_and_scaling_byte_identical_on_the_engine(job16: Path, cluster: str,
                                                           tmp_path: Path, monkeypatch) -> None:
    """The 2-host straggler sample, the random 16-host job, hosts without a shared wall
    clock (aligned on collective ends, which round 2 must apply to its host's events) and a
    single file:
    compare and scaling, with and without per-row filters, in this process, on the cluster
    and by loading each run whole give the same output, byte for byte."""
    import tracelens.analyze.runs.profile_parts as engine_runs
    from tests.synth_helpers import write_skewed_hosts

    s, j = str(STRAGGLER), str(job16)
    skewed = str(write_skewed_hosts(tmp_path, (None, None, None)))
    variants = [("compare", s, j, "--format", "json"),
                ("scaling", j, s, "--format", "json", "--category", "collective",
                 "--category", "gemm"),
                ("compare", skewed, s, "--format", "csv", "--kernel", "Generic|fusion"),
                ("scaling", s, skewed, "--format", "json"),
                ("scaling", str(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"), s, "--format",
                 "json", "--category", "gemm")]  # a run of one file: one round
    got = {v: [_cli(*v, "--quiet", "--workers", "1"), _cli(*v, "--quiet", "--scheduler", cluster)]
           for v in variants}
    monkeypatch.setattr(engine_runs, "run_profiles", _loaded_profiles)
    for v, (here, there) in got.items():
        assert here == there == _cli(*v, "--quiet"), v
    assert json.loads(got[variants[1]][0])["filters"] == {"category": ["collective", "gemm"]}
    assert load([Path(skewed)]).meta.alignment.startswith("collective ends")


def test_compare_host_files_fail_with_their_path_from_the_cluster(tmp_path: Path,
                                                                  cluster: str) -> None:
    """A broken host file in either round-1 run is one error line naming it, exit 2."""
    from click.testing import CliRunner

    from tracelens.cli.commands import main

    run = _straggler_copy(tmp_path)
    bad = run / "mi355x-node1.xplane.pb"
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    res = CliRunner().invoke(main, ["compare", str(STRAGGLER), str(tmp_path), "--scheduler",
                                    cluster])
    assert res.exit_code == 2
    assert res.stderr.startswith(f"error: {bad}: ") and res.stderr.count("\n") == 1


def test_compare_maps_both_rounds_of_both_runs_on_one_client(cluster: str,
                                                              monkeypatch) -> None:
    """One cluster start (or connection) per command, not one per round and run."""
    import tracelens.engine.cluster as dask_map

    opened = []

    class Counted(dask_map._client):
        def __init__(self, n, address):
            opened.append(address)
            super().__init__(n, address)

    monkeypatch.setattr(dask_map, "_client", Counted)
    _cli("compare", str(STRAGGLER), str(STRAGGLER), "--format", "json", "--scheduler", cluster)
    # the two rounds of both runs on the first client; this job's hosts pick different median
    # steps, so its findings' path is solved again on the job's step (more clients, the same
    # cluster: never a local one)
    assert opened[0] == cluster and set(opened) == {cluster}


def test_a_run_of_one_file_is_read_once(monkeypatch) -> None:
    """Round 2 re-reads host files only for runs of several: one file holds every
    participant of its collectives."""
    import tracelens.loading.loader as loader

    read = []
    real = loader.load_host
    monkeypatch.setattr(loader, "load_host", lambda path, *a: read.append(path) or real(path, *a))
    one, two = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb", STRAGGLER
    _cli("compare", str(one), str(two), "--format", "json", "--workers", "1")
    names = [p.name for p in read]
    assert names[:5] == [one.name] + ["mi355x-node0.xplane.pb", "mi355x-node1.xplane.pb"] * 2
    # the straggler's hosts pick different median steps: its findings' path is solved again
    # on the job's step (its hosts read again); the file of one host is never read again
    assert one.name not in names[5:] and set(names[5:]) <= {"mi355x-node0.xplane.pb",
                                                            "mi355x-node1.xplane.pb"}


# -- report on the engine: the summary and the step-timeline window ------------------------------

def _report_page(path: Path, tmp_path: Path, *argv: str) -> bytes:
    """The report's HTML, the generation time (the only line that may differ) blanked."""
    import re

    out = tmp_path / "report.html"
    _cli("report", str(path), "-o", str(out), "--quiet", *argv)
    return re.sub(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC", b"T", out.read_bytes())


def _report_loaded(path: Path, step: int | None = None, device: int | None = None,
                   step_marker: str | None = None) -> bytes:
    """The report's HTML from the whole job loaded in one process (the path of --host)."""
    import re

    from dataclasses import replace

    from reports.html.page import render_html
    from tracelens.analyze.summary.build import summarize
    from tracelens.analyze.timeline.window import timeline_window

    trace = load([path], step_marker=step_marker)
    summary = summarize(trace, device=device, step=step, top=100)
    shown = trace if device is None else replace(
        trace, events=trace.events.filter(pl.col("device") == device))
    window = timeline_window(shown, step=step, max_devices=4, max_events=1500)
    return re.sub(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC", b"T",
                  render_html(summary, window=window).encode())


@pytest.mark.parametrize("name", ["straggler", "job16"])
def test_report_byte_identical_in_process_on_a_cluster_and_loaded_whole(
        name: str, cluster: str, request, tmp_path: Path, loaded) -> None:
    """``report`` per host (in this process, on a cluster) writes the page the whole job
    loaded in one process gives: the median step, a chosen step, one device; without steps
    (a marker that matches nothing) the first activities' stretch."""
    path = request.getfixturevalue("job16") if name == "job16" else STRAGGLER
    step = sorted(set(loaded(path).steps["step"].to_list()))[-1]
    for step_, device, marker in [(None, None, None), (step, None, None), (None, 1, None),
                                  (None, None, "no such marker")]:
        argv = [*(("--step", str(step_)) if step_ is not None else ()),
                *(("--device", str(device)) if device is not None else ()),
                *(("--step-marker", marker) if marker else ())]
        whole = _report_loaded(path, step_, device, marker)
        assert _report_page(path, tmp_path, *argv, "--workers", "1") == whole, argv
        assert _report_page(path, tmp_path, *argv, "--scheduler", cluster) == whole, argv


def test_hosts_that_mark_steps_differently_are_said() -> None:
    """Files whose steps come from different sources (annotations on some, none on others)
    are marked per file on the engine; the summary says so instead of naming one file's
    source for the whole job."""
    folder = SHARED / "kineto" / "mi300x_inference"
    if not folder.exists():
        pytest.skip(f"real traces {folder} not present (shared/ is not beside this checkout)")
    got = json.loads(_cli("summarize", str(folder), "--format", "json", "--workers", "1"))
    mixed = [w for w in got["warnings"] if w.startswith("steps were marked per host file")]
    assert len(mixed) == 1 and "none: " in mixed[0] and "graph-replay: " in mixed[0]
    assert got["steps_source"] == "annotation:cpu-launches+graph-replay+none"
    one = json.loads(_cli("summarize", str(SAMPLES / "mi355x_2x8gpu_straggler"),
                          "--format", "json", "--workers", "1"))
    assert not [w for w in one["warnings"] if w.startswith("steps were marked")]


def test_a_packed_summary_partial_unpacks_to_the_same_frames(loaded) -> None:
    """What a host sends packed (compressed frames, strings as Categorical) unpacks to the
    frames it packed, value for value and type for type, and a program that two hosts send
    alike is one object in the process that receives both."""
    import dataclasses

    from tracelens.analyze.summary.packed import pack_summary, unpack_summary
    from tracelens.analyze.summary.build import summary_partial

    f = next((STRAGGLER / "plugins" / "profile").glob("*/mi355x-node0.xplane.pb"))
    part = summary_partial(loaded(f))
    packed = pickle.loads(pickle.dumps(pack_summary(part)))
    again = unpack_summary(packed)
    for fld in dataclasses.fields(part):
        want, got = getattr(part, fld.name), getattr(again, fld.name)
        if isinstance(want, pl.DataFrame):
            assert got.schema == want.schema and got.equals(want), fld.name
    assert again.hlo.programs.equals(part.hlo.programs) and part.hlo.programs.height
    other = pickle.loads(pickle.dumps(pack_summary(part)))
    assert [b.data for b in other.hlo.programs.protos] == part.hlo.programs["hlo_proto"].to_list()
    assert all(a is b for a, b in zip(other.hlo.programs.protos, packed.hlo.programs.protos))


# -- nothing waits forever (issue 25 D14) --------------------------------------------------------

def _sleep(s: float) -> float:
    import time

    time.sleep(s)
    return s


@pytest.mark.timeout(60, method="thread")
def test_a_scheduler_without_workers_is_one_error_line(monkeypatch) -> None:
    from click.testing import CliRunner
    from distributed import LocalCluster

    from tracelens.cli.commands import main

    monkeypatch.setenv("TRACELENS_WORKER_WAIT_S", "2")
    with LocalCluster(n_workers=0, processes=True, dashboard_address=None,
                      host="127.0.0.1") as empty:
        res = CliRunner().invoke(main, ["summarize", str(STRAGGLER), "--scheduler",
                                        empty.scheduler_address])
    assert res.exit_code == 2, res.output
    assert res.stderr == (f"error: {empty.scheduler_address}: no workers joined within 2 s "
                          "(TRACELENS_WORKER_WAIT_S raises the limit)\n")


@pytest.mark.timeout(60, method="thread")
def test_every_worker_lost_mid_map_is_an_error(monkeypatch, tmp_path: Path) -> None:
    """A fresh cluster (the module's must keep its workers): its only worker closed while
    its task sleeps; no worker joins again."""
    import threading

    from distributed import Client

    monkeypatch.setenv("TRACELENS_WORKER_WAIT_S", "2")
    with local_cluster(1, str(tmp_path)) as c, Client(c, set_as_default=False) as client:
        threading.Timer(2.0, lambda: c.scale(0)).start()
        with pytest.raises(TraceInputError) as info:
            run_map(_sleep, [600.0], client=client)
    assert info.value.problem.startswith("every worker was lost and none joined within 2 s")


@pytest.mark.timeout(60, method="thread")
def test_a_stalled_item_fails_naming_it(cluster: str, monkeypatch) -> None:
    monkeypatch.setenv("TRACELENS_STALL_S", "2")
    with pytest.raises(TraceInputError) as info:
        run_map(_sleep, [0.0, 600.0], scheduler=cluster)
    assert info.value.path == "600.0"
    assert info.value.problem == ("no item finished within 2 s, 1 still running: 600.0 "
                                  "(TRACELENS_STALL_S raises the limit)")


@pytest.mark.parametrize("raw", ["abc", "0", "-5", "inf"])
def test_a_bad_limit_is_an_error_naming_its_variable(monkeypatch, raw: str) -> None:
    from tracelens.engine.cluster import limit_s

    monkeypatch.setenv("TRACELENS_STALL_S", raw)
    with pytest.raises(TraceInputError, match="must be a positive number of seconds"):
        limit_s("TRACELENS_STALL_S", 1800.0)
    monkeypatch.setenv("TRACELENS_STALL_S", "2.5")
    assert limit_s("TRACELENS_STALL_S", 1800.0) == 2.5
