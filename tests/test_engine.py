"""The engine (issue 17): the per-host map and the reduce give the same job in this process
and on a Dask cluster; input errors from a worker arrive with their path.

One module-scoped LocalCluster of 2 worker processes serves every test (``--scheduler`` /
``scheduler=``); one test starts the embedded cluster of ``--workers 2`` itself.
"""

from __future__ import annotations

import os
import pickle
import random
import sys
from pathlib import Path

import polars as pl
import pytest

from tracelens.engine import (HostFile, MapOptions, local_cluster, map_host, merged_breakdown,
                              run_hosts, run_map)
from tracelens.errors import TraceInputError
from tracelens.loader import load

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
STRAGGLER = SAMPLES / "mi355x_2x8gpu_straggler"


@pytest.fixture(scope="module")
def cluster():
    """A 2-process LocalCluster for the module; its address is what ``--scheduler`` takes."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not import it
    with local_cluster(2) as c:
        yield c.scheduler_address


@pytest.fixture(scope="module")
def job16(tmp_path_factory):
    """A randomized 16-host job (2 GPUs each): MoE or not, straggler or not, hosts with or
    without a shared wall clock; the draw is printed so a failure can be replayed."""
    from tracelens_dev.writers.xspace import write
    from tracelens_dev.synth import Scenario, build
    from tracelens_dev.synth.scenario import Straggler

    seed = int(os.environ.get("TRACELENS_TEST_SEED", random.SystemRandom().randrange(1 << 16)))
    rng = random.Random(seed)
    sc = Scenario(hosts=16, gpus=2, layers=2, steps=2, seed=seed, moe=rng.random() < 0.5,
                  overlap=rng.choice([0.0, 0.5, 0.9]),
                  straggler=Straggler(host=rng.randrange(16), device=0, slowdown=1.5)
                  if rng.random() < 0.5 else None)
    print(f"job16: TRACELENS_TEST_SEED={seed} {sc}")
    root = tmp_path_factory.mktemp("job16") / "logs"
    write(build(sc, truth=False).trace, root)
    return root


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
    monkeypatch.chdir(tmp_path)
    got = run_map(_pid_square, [1, 2, 3, 4], workers=2)
    assert [r for r, _ in got] == [1, 4, 9, 16]
    assert os.getpid() not in {pid for _, pid in got}
    assert list(tmp_path.iterdir()) == []


def test_unreadable_host_file_fails_with_its_path_from_a_worker(tmp_path: Path,
                                                                cluster: str) -> None:
    run = tmp_path / "plugins" / "profile" / "run1"
    run.mkdir(parents=True)
    for src in sorted((STRAGGLER / "plugins" / "profile").glob("*/*.xplane.pb")):
        (run / src.name).write_bytes(src.read_bytes())
    bad = run / "mi355x-node1.xplane.pb"
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    with pytest.raises(TraceInputError) as local:
        load([tmp_path])
    with pytest.raises(TraceInputError) as remote:
        run_hosts([tmp_path], MapOptions(partials=("breakdown",)), scheduler=cluster)
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


def _frames(b) -> tuple[pl.DataFrame, pl.DataFrame]:
    keys = ["host", "rank", "device"]
    return (b.timeline.drop("first_ns", "last_ns").sort(keys),
            b.categories.sort(*keys, "category"))


@pytest.mark.parametrize("which", ["straggler", "job16"])
def test_placed_partials_equal_the_one_process_trace(which: str, cluster: str,
                                                     request) -> None:
    """The reduce places each host's partial (ranks, renamed hosts) where the one-process
    loader puts its events, and builds the same job metadata, on either engine."""
    from tracelens.analyze.timeline import device_breakdown

    path = STRAGGLER if which == "straggler" else request.getfixturevalue("job16")
    whole = load([path])
    want = _frames(device_breakdown(whole.events))
    options = MapOptions(partials=("breakdown",))
    for kw in ({"workers": 1}, {"scheduler": cluster}):
        job = run_hosts([path], options, **kw)
        got = _frames(merged_breakdown(job))
        assert got[0].equals(want[0]) and got[1].equals(want[1]), kw
        assert job.meta.hosts == whole.meta.hosts and job.meta.ranks == whole.meta.ranks
        assert job.meta.sources == whole.meta.sources
        assert job.meta.alignment == whole.meta.alignment
        assert job.meta.decoder == whole.meta.decoder


def test_map_host_sends_back_no_event_frames() -> None:
    """The map's result is its partials and metadata: nothing as long as the events."""
    f = next((STRAGGLER / "plugins" / "profile").glob("*/mi355x-node0.xplane.pb"))
    part = map_host(HostFile(f), MapOptions(partials=("breakdown",)))
    n_events = load([f]).events.height
    frames = [v for b in part.partials.values() for v in vars(b).values()
              if isinstance(v, pl.DataFrame)]
    assert frames and max(df.height for df in frames) * 10 < n_events
    assert len(pickle.dumps(part)) * 3 < f.stat().st_size
