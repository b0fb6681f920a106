"""The step simulator (issue 45, tracelens_dev/sim): step times, its own critical path and
every change's counterfactual, worked out by hand (docs/simulator.md)."""

from __future__ import annotations

import pytest

from tracelens_dev.sim import (Change, Collective, CopyD2H, HostOp, Job, Kernel, Launch,
                               RecordEvent, Sync, WaitEvent, counterfactual, critical_path,
                               simulate)

US = 1_000


def _rank(late_ns: int) -> tuple:
    """A host op, three launches (GEMM, elementwise, all-reduce), the all-reduce waiting on
    an event recorded after the elementwise kernel, a device sync. ``late_ns``: planted delay
    inside the elementwise kernel."""
    return (HostOp(20 * US, "forward"),
            Launch(Kernel("gemm", 100 * US, attainable_ns=60 * US)),
            Launch(Kernel("elementwise", 30 * US + late_ns, delay_ns=late_ns)),
            RecordEvent("compute", "ready"),
            WaitEvent("comm", "ready"),
            Launch(Collective("all-reduce", (0, 1), 40 * US, "ar.0")),
            Sync())


HAND = Job((_rank(0), _rank(50 * US)), call_ns=2 * US, launch_latency_ns=5 * US)


def test_hand_built_step_and_path() -> None:
    # Both ranks, host: forward [0, 20], launch GEMM [20, 22], launch elementwise [22, 24],
    # record [24, 26], wait [26, 28], launch all-reduce [28, 30], sync from 30.
    # GEMM: ready 22 + 5 = 27, runs [27, 127]. Elementwise: ready 29, stream busy until 127:
    # rank 0 [127, 157], rank 1 (50 us late) [127, 207]. The all-reduce (ready 35) waits for
    # the event = the elementwise end: rank 0 arrives 157, rank 1 at 207; both end at
    # 207 + 40 = 247. The syncs end at 247: T = 247 us.
    sim = simulate(HAND)
    assert sim.step_ns == 247 * US
    assert sim.rank_end == [247 * US, 247 * US]
    # The walk stands on rank 0's all-reduce (device before host, then lowest rank):
    # communication 207 -> 247 = 40; rank 0 waited from its arrival 157 to 207 for GPU1:
    # wait 50, and the walk goes on in rank 1's history below 157: its all-reduce's binding
    # constraint is the event (207 > ready 35), at the elementwise end (sync 0); elementwise
    # [127, 207] clipped at 157 = 30; its stream's previous item binds (127 > ready 29):
    # GEMM 100; GEMM's launch binds: launch latency 22 -> 27 = 5; the launch call 2 and the
    # forward op 20 are host: 22. 40 + 50 + 30 + 100 + 5 + 22 = 247.
    path = critical_path(sim)
    assert path.step_ns == 247 * US
    assert path.composition == {"gemm": 100 * US, "wait:sim-node0/GPU1": 50 * US,
                                "communication": 40 * US, "elementwise": 30 * US,
                                "host": 22 * US, "launch_latency": 5 * US}
    assert sum(p.ns for p in path.pieces) == sim.step_ns


def test_on_time() -> None:
    # Rank 1 without its 50 us: both elementwise kernels end at 157, all-reduce 157 + 40.
    assert counterfactual(HAND, Change("on_time", 1)) == 197 * US
    assert counterfactual(HAND, Change("on_time", 0)) == 247 * US  # rank 0 has no delay


def test_hide() -> None:
    # Each all-reduce ends at its own arrival: rank 0 at 157, rank 1 at 207; the syncs too.
    assert counterfactual(HAND, Change("hide", "all-reduce")) == 207 * US


def test_faster() -> None:
    # GEMM 50% faster: [27, 77]; rank 1's elementwise [77, 157], last arrival 157, + 40.
    assert counterfactual(HAND, Change("faster", "gemm", 50)) == 197 * US
    # floored to whole ns: 30 us 1/3 faster is 20_000 ns (30_000 * 66.67 // 100 = 20_000)
    one = Job(((Launch(Kernel("reduction", 30_001)),),), call_ns=0, launch_latency_ns=0)
    assert counterfactual(one, Change("faster", "reduction", 50)) == 15_000


def test_roofline() -> None:
    # GEMM at its attainable 60 us: [27, 87]; rank 1's elementwise [87, 167]; + 40.
    assert counterfactual(HAND, Change("roofline", "gemm")) == 207 * US


def test_host_faster() -> None:
    # Host 50% faster: forward 10, calls 1 us. GEMM launch [10, 11], ready 16, [16, 116];
    # rank 1's elementwise [116, 196]; all-reduce ends 236.
    assert counterfactual(HAND, Change("host_faster", pct=50)) == 236 * US


HOST_BOUND = Job(((Launch(Kernel("elementwise", 1 * US)), HostOp(10 * US),
                   Launch(Kernel("elementwise", 1 * US)), HostOp(10 * US),
                   Launch(Kernel("elementwise", 1 * US)), Sync("compute")),),
                 call_ns=2 * US, launch_latency_ns=5 * US)


def test_graph_launch_and_host_bound_path() -> None:
    # Launches [0, 2], [12, 14], [24, 26]; kernels [7, 8], [19, 20], [31, 32]; the sync from
    # 26 ends at 32. Path: the last kernel 1, launch latency 5, its launch 2, gap 10, launch
    # 2, gap 10, launch 2 = host 26.
    sim = simulate(HOST_BOUND)
    assert sim.step_ns == 32 * US
    assert critical_path(sim).composition == {"host": 26 * US, "launch_latency": 5 * US,
                                              "elementwise": 1 * US}
    # One graph launch [0, 2]: kernels ready at 7 run [7, 8], [8, 9], [9, 10]; sync ends 10.
    assert counterfactual(HOST_BOUND, Change("graph_launch")) == 10 * US
    # Only instructions [0, 3) of rank 0 (launch, gap, launch): one graph launch [0, 2],
    # kernels [7, 8], [8, 9]; the gap after the range stays [2, 12]; the third launch
    # [12, 14], its kernel [19, 20]; the sync ends 20.
    assert counterfactual(HOST_BOUND, Change("graph_launch", 0, lo=0, hi=3)) == 20 * US


def test_bounded_queue() -> None:
    # Q = 1: the second launch starts at 2 and blocks until the first kernel ends at 107;
    # enqueued at 107, it runs [112, 212]. Path: kernel 100, latency 5, the blocked launch
    # binds on the first kernel (sync 0), kernel 100, latency 5, launch call 2.
    job = Job(((Launch(Kernel("gemm", 100 * US)), Launch(Kernel("gemm", 100 * US)),
                Sync()),), call_ns=2 * US, launch_latency_ns=5 * US, queue_depth=1)
    sim = simulate(job)
    assert sim.step_ns == 212 * US
    assert critical_path(sim).composition == {"gemm": 200 * US, "launch_latency": 10 * US,
                                              "host": 2 * US}
    # unbounded: the second is enqueued at 4 and runs [107, 207] behind the first
    assert simulate(Job(job.programs, call_ns=2 * US, launch_latency_ns=5 * US)
                    ).step_ns == 207 * US


def test_blocking_copy_and_sync_piece() -> None:
    # GEMM [7, 57]; the D2H copy enqueued at 4 waits for the stream, runs [57, 67]; the call
    # ends at 67; then a 5 us host op: T = 72. Path: host 5, the copy's wait binds (sync 0),
    # copy 10 (memory), GEMM 50, latency 5, launch 2.
    job = Job(((Launch(Kernel("gemm", 50 * US)), CopyD2H(10 * US), HostOp(5 * US, "loss")),),
              call_ns=2 * US, launch_latency_ns=5 * US)
    sim = simulate(job)
    assert sim.step_ns == 72 * US
    assert critical_path(sim).composition == {"gemm": 50 * US, "memory": 10 * US,
                                              "host": 7 * US, "launch_latency": 5 * US}
    # A sync that outlasts the device: the call's own time is host, not sync.
    quick = Job(((Launch(Kernel("gemm", 1 * US)), HostOp(50 * US), Sync()),),
                call_ns=2 * US, launch_latency_ns=5 * US)
    assert critical_path(simulate(quick)).composition == {"host": 54 * US}


def test_event_wait_is_sync_and_pipeline_pair() -> None:
    # A send/recv pair between two stages: stage 0 computes 80 us first; stage 1 receives.
    # Stage 0: launch [0, 2], GEMM [7, 87], send launch [2, 4] ready 9, arrives 87.
    # Stage 1: recv launch [0, 2] ready 7, arrives 7; both end at 87 + 20 = 107.
    pair = Collective("send-recv", (0, 1), 20 * US, "p2p.0")
    job = Job(((Launch(Kernel("gemm", 80 * US)), RecordEvent("compute", "g"),
                WaitEvent("comm", "g"), Launch(pair), Sync()),
               (Launch(pair), Sync())), call_ns=2 * US, launch_latency_ns=5 * US)
    sim = simulate(job)
    assert sim.step_ns == 107 * US
    # Stood on rank 0's send (ends 107, lowest rank): communication 20, no wait (it arrived
    # last), event binds at 87 (sync 0), GEMM 80, latency 5, launch 2.
    assert critical_path(sim).composition == {"gemm": 80 * US, "communication": 20 * US,
                                              "launch_latency": 5 * US, "host": 2 * US}
    assert counterfactual(job, Change("hide", "send-recv")) == 87 * US


def test_deadlock_is_an_error() -> None:
    a = Collective("all-reduce", (0, 1), 1, "a")
    b = Collective("all-reduce", (0, 1), 1, "b")
    job = Job(((Launch(a), Launch(b), Sync()), (Launch(b), Launch(a), Sync())))
    with pytest.raises(RuntimeError, match="deadlock"):
        simulate(job)


def test_deterministic() -> None:
    from tracelens_dev.sim.scenarios import generate
    one, two = generate(7), generate(7)
    assert one == two
    a, b = simulate(one), simulate(two)
    assert [(i.start, i.end) for i in a.items] == [(i.start, i.end) for i in b.items]
    assert critical_path(a) == critical_path(b)


@pytest.mark.parametrize("fmt", ["xspace", "kineto", "rocpd"])
def test_written_bytes_deterministic(fmt: str, tmp_path) -> None:
    from tracelens_dev.sim.scenarios import generate
    from tracelens_dev.sim.trace import write

    def files(d) -> dict:
        return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}
    write(simulate(generate(5)), fmt, tmp_path / "a")
    write(simulate(generate(5)), fmt, tmp_path / "b")
    a, b = files(tmp_path / "a"), files(tmp_path / "b")
    assert a and a == b


@pytest.mark.parametrize("fmt", ["xspace", "xspace-device", "kineto", "rocpd", "rpd",
                                 "rocprof-json", "rocprof-csv"])
def test_written_step_reads_back(fmt: str, tmp_path) -> None:
    """Every format reads back as simulated: one step [0, T] per host, each category's
    device time, and every collective instance with all its members."""
    import polars as pl

    import tracelens
    from tracelens.core.instances import with_instance_keys
    from tracelens_dev.sim.scenarios import generate
    from tracelens_dev.sim.trace import write

    job = generate(9)  # device_bound, 4 ranks: every category but convolution/other
    sim = simulate(job)
    (path,) = write(sim, fmt, tmp_path)[:1]
    marker = r"step \d+" if fmt in ("rocpd", "rpd", "rocprof-json", "rocprof-csv") else None
    trace = tracelens.load(path, step_marker=marker)
    assert trace.steps.select("start_ns", "end_ns").unique().rows() == [(0, sim.step_ns)]
    want: dict[str, int] = {}
    for it in sim.items:
        cat = "collective" if isinstance(it.spec, Collective) else it.spec.category
        want[cat] = want.get(cat, 0) + it.ns
    got = dict(trace.events.group_by(pl.col("category").cast(pl.String)).agg(
        (pl.col("end_ns") - pl.col("start_ns")).sum()).rows())
    assert got == want
    inst = with_instance_keys(trace.events).group_by("instance_key", "occurrence").len()
    assert inst["len"].to_list() == [job.ranks] * inst.height
    assert inst.height == len(sim.arrivals)


@pytest.mark.parametrize("seed", range(0, 45, 4))
def test_changes_never_slow_the_step(seed: int) -> None:
    """Every start and end is a max of sums of durations: shortening durations cannot make
    the step longer, a 0% change changes nothing, and the path adds up (checked inside)."""
    from tracelens_dev.sim.scenarios import generate
    job = generate(seed)
    T = simulate(job).step_ns
    assert counterfactual(job, Change("faster", "gemm", 0)) == T
    assert counterfactual(job, Change("host_faster", pct=0)) == T
    changes = [Change("faster", "gemm", 30), Change("faster", "elementwise", 50),
               Change("host_faster", pct=50), Change("roofline", "gemm"),
               Change("graph_launch"), Change("on_time", job.meta.get("straggler") or 0),
               *(Change("hide", t) for t in ("all-reduce", "all-gather", "reduce-scatter",
                                              "send-recv"))]
    for ch in changes:
        assert counterfactual(job, ch) <= T, ch
    if job.meta.get("straggler") is not None:
        assert counterfactual(job, Change("on_time", job.meta["straggler"])) < T
