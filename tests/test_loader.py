"""The loader in parts: the readers' registry, the one place that decides threads, and the
typed facts combining leaves in ``trace.meta``."""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl
import pytest

import tracelens
from tests.conftest import SAMPLES
from tracelens.loading import formats
from tracelens.core.errors import TraceInputError
from tracelens.loading.formats import Reader
from parsers.xspace.facts import decoders
from tracelens.core.model import HostInfo, RankInfo, Trace

SAMPLE = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"
STRAGGLER = SAMPLES / "mi355x_2x8gpu_straggler"


def test_a_format_is_read_by_its_registry_entry(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """One line plugs a reader in (here for Chrome trace JSON, which has none); without its
    entry the format is refused with the reason."""
    chrome = tmp_path / "run.json"
    chrome.write_text('{"traceEvents": []}')
    with pytest.raises(TraceInputError, match="Chrome trace JSON"):
        tracelens.load(chrome)
    xspace = formats.READERS["xspace"]
    monkeypatch.setitem(formats.READERS, "chrome-json",
                        Reader(lambda p, m, t: xspace.read(SAMPLE, m, t), native=False))
    got, want = tracelens.load(chrome), tracelens.load(SAMPLE)
    assert got.events.equals(want.events, null_equal=True)
    monkeypatch.delitem(formats.READERS, "xspace")
    with pytest.raises(TraceInputError, match="not a trace format tracelens reads"):
        tracelens.load(SAMPLE)


def test_reading_shares_the_cpus_between_files_read_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two XSpace files on 8 CPUs: two threads, 4 decoder threads each; one at a time: the
    decoder's own default (None)."""
    seen: list[int | None] = []
    xspace = formats.READERS["xspace"]

    def read(p: Path, marker: str | None, threads: int | None) -> Trace:
        seen.append(threads)
        return xspace.read(p, marker, threads)

    monkeypatch.setitem(formats.READERS, "xspace", Reader(read, native=True))
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setenv("TRACELENS_WORKERS", "2")
    parallel = tracelens.load(STRAGGLER)
    assert seen == [4, 4]
    seen.clear()
    monkeypatch.setenv("TRACELENS_WORKERS", "1")
    serial = tracelens.load(STRAGGLER)
    assert seen == [None, None]
    assert parallel.events.equals(serial.events, null_equal=True)


def test_combined_hosts_and_ranks_are_typed() -> None:
    trace = tracelens.load(STRAGGLER)
    files = sorted(str(p) for p in STRAGGLER.rglob("*.xplane.pb"))
    hosts = ["mi355x-node0", "mi355x-node1"]
    assert trace.meta.hosts == {h: HostInfo(path=f, ranks=[i], paths=[f])
                                for i, (h, f) in enumerate(zip(hosts, files))}
    assert trace.meta.ranks == [RankInfo(rank=i, host=h, pid=None, path=f, format="xspace")
                                for i, (h, f) in enumerate(zip(hosts, files))]
    assert decoders(trace.meta) == {f: decoders(trace.meta)[files[0]] for f in files}
    assert trace.meta.unaligned is None and trace.meta.alignment.startswith("wall-clock")
    assert isinstance(trace.meta.op_costs, pl.DataFrame)


def test_one_file_keeps_its_own_host_facts() -> None:
    trace = tracelens.load(SAMPLE)
    (host, info), = trace.meta.hosts.items()
    assert info.path == str(SAMPLE) and info.profile_start_ns is not None
    assert trace.meta.ranks == [] and trace.meta.alignment == "single host"
