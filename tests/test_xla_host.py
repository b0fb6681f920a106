"""The host side of XLA programs (``parsers/xspace/xla_host.py``) on the real TPU runs of
``sample_traces/real_runs``: the XSpace reader keeps the runtime's launches, syncs, transfers
and dispatches as host events, links each launch to the run's first op, and the critical path
binds the device's gaps to them (docs/critical-path.md, "XLA host work")."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest

import tracelens
from parsers.xspace.reader import read
from parsers.xspace.space import parse
from tracelens.analyze.critical.walk import tail_component, window_lengths

RUNS = Path(__file__).resolve().parents[1] / "sample_traces" / "real_runs"
PAUSE = RUNS / "host_pause" / "tpu_pause.xplane.pb.gz"
SYNC = RUNS / "host_sync" / "tpu_sync.xplane.pb.gz"
H2D = RUNS / "h2d" / "tpu_transfer.xplane.pb.gz"
CPU = RUNS / "host_pause" / "cpu1_pause.xplane.pb.gz"


def _runs(path: Path) -> list[tuple[int, int]]:
    """(run_id, XLA Modules start ns) of every program run on the file's TPU planes, read
    with protobuf here, not by the reader under test."""
    space = parse(gzip.open(path).read(), path)
    out = []
    for plane in space.planes:
        if not plane.name.startswith("/device:TPU:"):
            continue
        refs = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            if line.name == "XLA Modules":
                for ev in line.events:
                    st = {refs[s.metadata_id]: s.int64_value or s.uint64_value
                          for s in ev.stats}
                    out.append((st["run_id"], line.timestamp_ns + ev.offset_ps // 1000))
    return out


@pytest.fixture(scope="module")
def pause() -> tracelens.Trace:
    return tracelens.load(PAUSE)


def test_launches_link_each_run_to_its_first_op(pause: tracelens.Trace) -> None:
    """12 runs in the file, 12 DoEnqueueProgram launches, each with a correlation id that one
    device op carries: the first op of the run of the same run_id."""
    runs = _runs(PAUSE)
    assert len(runs) == 12
    he, ev = pause.host_events, pause.events
    launches = he.filter(pl.col("name") == "DoEnqueueProgram")
    assert launches.height == 12 and launches["correlation_id"].null_count() == 0
    assert (launches["correlation_id"] < 0).all()  # never a CUPTI id of the same host
    linked = ev.filter(pl.col("correlation_id").is_not_null())
    assert sorted(linked["correlation_id"].to_list()) == sorted(
        launches["correlation_id"].to_list())
    # each linked op is the first op of its run on the device timeline
    for cid, start in linked.select("correlation_id", "start_ns").iter_rows():
        before = ev.filter((pl.col("start_ns") < start)
                           & (pl.col("start_ns") > start - 1_000_000))
        assert before.filter(pl.col("end_ns") > start).is_empty(), cid


def test_the_tpu_clock_is_moved_behind_its_launches(pause: tracelens.Trace) -> None:
    """On this file the device's runs start up to 583.6 µs before the host began to enqueue
    them (read off the file: 12 runs, 519-584 µs early): the reader moves the TPU's
    activities that much later, so no run starts before its launch, and says so."""
    notes = [n for n in pause.meta.notices if n.code == "xspace.device_clock_behind"]
    assert len(notes) == 1 and "583.6 us" in notes[0].text
    he = pause.host_events.filter(pl.col("name") == "DoEnqueueProgram")
    got = pause.events.join(he.select("correlation_id", l_s="start_ns"), on="correlation_id")
    lag = (got["start_ns"] - got["l_s"])
    assert lag.min() == 0 and lag.max() < 100_000


def test_syncs_transfers_and_dispatches_are_host_events() -> None:
    sync = tracelens.load(SYNC).host_events
    h2d = tracelens.load(H2D).host_events
    assert sync.filter(pl.col("name") == "np.asarray(jax.Array)").height == 12
    assert h2d.filter(pl.col("name") == "Linearize").height == 12
    assert h2d.filter(pl.col("name") == "DevicePutWithSharding").height == 12
    assert sync.filter(pl.col("name").cast(pl.String).str.starts_with("PjitFunction(")
                       ).height == 24
    # bounded: the runtime's allocator, mutex and thread-pool events are not read
    for he in (sync, h2d):
        names = set(he["name"].cast(pl.String).to_list())
        assert not {n for n in names if n.startswith(("Mutex", "Memory", "Allocate"))}
        assert set(he["kind"].cast(pl.String).unique().to_list()) <= {"api", "step"}


@pytest.mark.parametrize("path", [PAUSE, CPU], ids=["tpu", "xla_cpu"])
def test_both_decoders_read_the_same_host_work(path: Path) -> None:
    c, py = read(path, decoder="c"), read(path, decoder="python")
    key = ["tid", "start_ns", "name"]
    assert c.host_events.sort(key).equals(py.host_events.sort(key))
    assert c.events.sort("device", "stream", "start_ns").equals(
        py.events.sort("device", "stream", "start_ns"))


@pytest.mark.parametrize("path,devices", [(CPU, 1)], ids=["cpu1"])
def test_xla_cpu_dispatch_links_to_its_run(path: Path, devices: int) -> None:
    """XLA:CPU: each run's first op (ops carry run_id) is linked to the program's dispatch
    on the calling thread that began before it (ExecuteHelperOnSingleDevice, which returns
    before the run's ops start; the multi-device Execute, which returns after, is not
    read)."""
    t = tracelens.load(path)
    disp = t.host_events.filter(pl.col("correlation_id").is_not_null())
    assert disp.height >= 12
    assert set(disp["name"].cast(pl.String).to_list()) == {
        "CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice"}
    got = t.events.join(disp.select("correlation_id", l_s="start_ns", l_e="end_ns"),
                        on="correlation_id")
    assert got.height == devices * disp.height and (got["start_ns"] >= got["l_e"]).all()
    assert got.group_by("correlation_id").agg(pl.col("device").n_unique())["device"].min() \
        == devices


def test_the_pause_is_host_time_on_the_path() -> None:
    """tpu_pause, step 5: the path ends on the runtime's notice that the run is done
    (CompleteCallbacks, a sync); after it the window went on 6.079 ms with nothing on the
    device or in the runtime: the host's own time (the 5 ms sleep and the loop), not idle;
    the ``host`` what-if takes it away: 5.065 ms, the run without the pause measured 5.111."""
    cp = tracelens.TraceAnalysis(tracelens.load(PAUSE)).critical_path(step=5, top=100)
    comp = {c.component: c.ns for c in cp.paths[0].composition}
    assert comp.get("idle", 0) < 1000 and comp["host"] > 6_000_000
    host = next(w for w in cp.what_if if w.change == "host")
    assert host.projected_step_ns == pytest.approx(5_111_000, rel=0.02)
    assert host.saved_ns <= host.on_path_ns


def test_tail_rules() -> None:
    assert tail_component(True) == "host" and tail_component(False) == "idle"
    rows = [(0.0, 10.0, 6.0, 4.0), (0.0, 10.0, 5.0, 3.0)]
    assert window_lengths(rows) == [8.0, 7.0]  # the 4 ns tail after the latest end kept
    assert window_lengths(rows, [True, False]) == [4.0, 3.0]  # a host tail goes, for both


def test_python_tracer_frames_are_not_read() -> None:
    """A file made with the Python tracer on (sample_traces/hlo/planted.xplane.pb) names its
    frames ``$<file>:<line> <function>``, ``$api.py:2479 block_until_ready`` among them:
    none is read as host work (a host plane holds millions of frames)."""
    he = tracelens.load(RUNS.parent / "hlo" / "planted.xplane.pb").host_events
    names = he["name"].cast(pl.String).to_list()
    assert names and not [n for n in names if n.startswith("$")]
