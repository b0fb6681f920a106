"""``report`` reads each host file once (issue 26): round 1 sends, with the choice of the
step-timeline window, each host's guess of what the window needs of it
(:mod:`tracelens.analyze.timeline.window_parts`); only the owners of shown devices whose guess
missed
are read again. The page is the one the whole job loaded in one process gives.

Reads are counted where every path reads a file: :func:`tracelens.loading.reading.read_one` (the
registry's reader on one file), here and, for the local cluster, on its workers.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest
from distributed import WorkerPlugin

import tracelens.loading.reading as reading
from tests.conftest import REAL_XPROF
from tests import test_engine
from tests.test_engine import SAMPLES, STRAGGLER, _report_loaded, _report_page

job16 = test_engine.job16  # the 16-host job, built once for this module

pytestmark = pytest.mark.timeout(300, method="thread")

SINGLE = [*(REAL_XPROF / n for n in ("cpu_4dev_dp_allreduce.xplane.pb",
                                      "mi300x_jax08_attention.xplane.pb",
                                      "mi300x_jax08_conv_8gpu.xplane.pb",
                                      "mi300x_jax08_gemm.xplane.pb")),
          *sorted(SAMPLES.glob("*.xplane.pb"))]


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """The name of every file read in this process, in order (files read one at a time)."""
    got: list[str] = []
    real = reading.read_one

    def counting(reader, f):  # noqa: ANN001, ANN202
        got.append(Path(f).name)
        return real(reader, f)

    monkeypatch.setenv("TRACELENS_WORKERS", "1")
    monkeypatch.setattr(reading, "read_one", counting)
    return got


def _files(path: Path) -> list[str]:
    return sorted(p.name for p in ([path] if path.is_file() else path.rglob("*.xplane.pb")))


@pytest.mark.parametrize("path", SINGLE, ids=lambda p: p.name.split(".")[0])
def test_report_of_one_file_reads_it_once_and_draws_the_same_page(path: Path, tmp_path: Path,
                                                                  reads: list[str]) -> None:
    """The real XSpace traces and the bundled samples: one read, the page of the trace
    loaded whole (the page before the window came in one read)."""
    if not path.exists():
        pytest.skip(f"real trace {path} not present (shared/ is not beside this checkout)")
    page = _report_page(path, tmp_path, "--workers", "1")
    assert reads == [path.name]
    assert page == _report_loaded(path)


@pytest.mark.parametrize("name", ["straggler", "job16"])
@pytest.mark.parametrize("argv", [(), ("--device", "1"), ("--step-marker", "no such marker"),
                                  ("--category", "gemm")], ids=["", "device", "no-steps", "gemm"])
def test_report_of_many_files_in_this_process_reads_each_once(name: str, argv: tuple[str, ...],
                                                              request, reads: list[str]) -> None:
    """Several host files mapped in this process: each read once (job16's sixteen hosts agree
    on their median step). The straggler sample's two hosts differ on it (each host read
    alone picks its own): where there is a critical path, it is solved again on the job's
    step, every host read once more (a cost said in docs/critical-path.md)."""
    from tracelens.api.jobs import job_summary
    from tracelens.api.inputs import JobInputs

    path = request.getfixturevalue("job16") if name == "job16" else STRAGGLER
    device = int(argv[1]) if argv[:1] == ("--device",) else None
    marker = argv[1] if argv[:1] == ("--step-marker",) else None
    cats = (argv[1],) if argv[:1] == ("--category",) else ()
    _, window = job_summary(JobInputs((path,), step_marker=marker, categories=cats,
                                         workers=1), device, None, 10, None, None, window=True)
    assert window is not None and window.events.height
    again = name == "straggler" and argv[:1] in ((), ("--device",))
    assert sorted(reads) == sorted(_files(path) * (2 if again else 1))


def test_report_loaded_whole_for_a_job_wide_filter_reads_each_once(job16: Path,
                                                                   reads: list[str]) -> None:
    from tracelens.api.jobs import job_summary
    from tracelens.api.inputs import JobInputs

    host = sorted({f.split(".")[0] for f in _files(job16)})[0]
    job_summary(JobInputs((job16,), hosts=(host,)), None, None, 10, None, None, window=True)
    assert sorted(reads) == _files(job16)


class _CountReads(WorkerPlugin):
    """A Dask worker plugin: each file a worker reads appended to ``log``."""

    def __init__(self, log: str) -> None:
        self.log = log

    def setup(self, worker: object) -> None:
        import tracelens.loading.reading as where

        real, log = where.read_one, self.log

        def counting(reader, f):  # noqa: ANN001, ANN202
            with open(log, "a") as out:
                out.write(Path(f).name + "\n")
            return real(reader, f)

        where.read_one = counting


@pytest.mark.slow
def test_report_on_a_local_cluster_reads_each_file_once(job16: Path, tmp_path: Path,
                                                        monkeypatch) -> None:
    """``--workers 2``: the page the whole job gives, each host file read once on the
    workers and none in this process."""
    import cloudpickle
    from distributed import Client

    import tracelens.engine.cluster as dask_map

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    log = tmp_path / "reads.log"
    real = dask_map.local_cluster

    def counted(n: int, scratch: str | None = None):  # noqa: ANN202
        cluster = real(n, scratch)
        with Client(cluster, set_as_default=False) as client:
            client.register_plugin(_CountReads(str(log)))
        return cluster

    here: list[str] = []
    in_client = reading.read_one
    monkeypatch.setattr(dask_map, "local_cluster", counted)
    monkeypatch.setattr(reading, "read_one", lambda r, f: here.append(f) or in_client(r, f))
    page = _report_page(job16, tmp_path, "--workers", "2")
    monkeypatch.undo()
    assert here == [] and sorted(log.read_text().split()) == _files(job16)
    assert page == _report_loaded(job16)


# -- when a guess misses: the owners it missed on are read again, the page is the same ---------

def test_a_missed_step_reads_its_owners_again(reads: list[str], monkeypatch) -> None:
    """Each host guessing only its own median step: the straggler sample's second host
    guesses step 1, the job draws step 0, so that host (it owns a shown device) is read
    again, alone; the page is the whole job's."""
    import tracelens.analyze.timeline.window_parts as parts
    from tracelens.analyze.timeline.window import timeline_window
    from tracelens.api.jobs import job_summary
    from tracelens.api.inputs import JobInputs
    from tracelens.loading.loader import load

    monkeypatch.setattr(parts, "GUESSED_STEPS", 1)
    _, window = job_summary(JobInputs((STRAGGLER,), workers=1), None, None, 10, None, None,
                               window=True)
    files = _files(STRAGGLER)  # read, then read again for the job's step (the path's)
    assert sorted(reads) == sorted([*files, *files, "mi355x-node1.xplane.pb"])
    reads.clear()
    want = timeline_window(load([STRAGGLER]), max_devices=4, max_events=1500)
    assert window is not None and want is not None and window.step == want.step == 0
    _same_window(window, want)


def test_a_window_past_what_hosts_sent_reads_them_again(job16: Path, reads: list[str],
                                                        monkeypatch) -> None:
    """Without steps, hosts that sent less than the window needs (here: only their first
    activity, by force) are read again; the window is the whole job's."""
    import polars as pl

    import tracelens.analyze.timeline.window_parts as parts
    from tracelens.analyze.timeline.window import timeline_window
    from tracelens.api.jobs import job_summary
    from tracelens.api.inputs import JobInputs
    from tracelens.loading.loader import load

    real = parts._opening
    monkeypatch.setattr(parts, "_opening", lambda ev, first: real(
        ev, first.sort("start_ns", "end_ns").head(1)))
    marker = "no such marker"
    _, window = job_summary(JobInputs((job16,), step_marker=marker, workers=1), None, None,
                               10, None, None, window=True)
    count = collections.Counter(reads)
    assert set(count) == set(_files(job16)) and 2 in count.values()
    want = timeline_window(load([job16], step_marker=marker), max_devices=4,
                           max_events=1500)
    assert window is not None and want is not None and window.step is None
    _same_window(window, want)
    assert isinstance(window.events, pl.DataFrame)


def _same_window(got: object, want: object) -> None:
    import dataclasses

    import polars as pl

    for f in dataclasses.fields(want):  # type: ignore[arg-type]
        a, b = getattr(got, f.name), getattr(want, f.name)
        assert a.equals(b) if isinstance(b, pl.DataFrame) else a == b, f.name
