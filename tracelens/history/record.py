"""A run's record: what ``history add`` stores, taken from the existing analyses.

The numbers are those the other commands print for the same inputs, from their own
analyses: :func:`record_run` loads the trace once in this process and hands it to them;
:func:`record_job` (the CLI's) runs their per-host maps on the engine, as the commands do:

- step time and its components: ``compare``'s profile
  (:func:`tracelens.analyze.runs.scaling.profile`: the median step, averaged over devices, split
  into components that add up to it exactly), and its kernel groups (the costliest
  :data:`KERNELS_KEPT`, per device-step);
- categories and MFU: ``summarize`` (:func:`tracelens.analyze.summary.build.summarize`; MFU is the
  headline's, from ``roofline.device_mfu``);
- exposed communication per type: ``collectives``
  (:func:`tracelens.analyze.communication.collectives.analyze`).

A run with nothing to compare (no device activity) is refused as ``compare`` refuses it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from tracelens.core.errors import TraceInputError
from tracelens.results.history import (CategoryRecord, CommRecord, FindingRecord,
                                       KernelRecord, RecordedInput, RunRecord)

if TYPE_CHECKING:
    from tracelens.analyze.runs.scaling import RunProfile
    from tracelens.results.collectives import Collectives
    from tracelens.results.summary import Summary

KERNELS_KEPT = 20  # kernel groups kept per run: the costliest (a run stays a few KB)
CHUNK = 1 << 20


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
    except OSError as exc:
        raise TraceInputError(path, f"cannot read: {exc.strerror or exc}") from None
    return h.hexdigest()


def hash_inputs(paths: Sequence[Path], step_marker: str | None,
                rules_files: Sequence[str]) -> tuple[tuple[RecordedInput, ...], str]:
    """(each trace file the loader would read, with its content hash; the run's identity).

    The identity covers the files' contents (not their paths: a trace moved is the same
    run), the step marker and the rule files' contents: whatever changes the numbers."""
    from tracelens.loading.loader import discover_files

    _, files, _, _ = discover_files(list(paths), step_marker)
    inputs = tuple(RecordedInput(str(f), file_sha256(f), f.stat().st_size) for f in files)
    ident = hashlib.sha256()
    for line in sorted(f"{i.sha256} {i.bytes}" for i in inputs):
        ident.update(line.encode() + b"\n")
    ident.update(f"step_marker={step_marker!r}\n".encode())
    for r in rules_files:
        ident.update(f"rules {file_sha256(Path(r))}\n".encode())
    return inputs, ident.hexdigest()


def now_utc() -> str:
    """The time recorded: ISO 8601 UTC with microseconds (sorts as text)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> str:
    """A user's ``--recorded-at`` (ISO 8601; UTC unless it says otherwise) in the stored
    form; ValueError when it is not a time."""
    t = _dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def record_run(paths: Sequence[Path], label: str, tags: dict[str, str], recorded_at: str,
               inputs: tuple[RecordedInput, ...], inputs_hash: str,
               step_marker: str | None = None, rules: object = None) -> RunRecord:
    """The record of the run behind ``paths``, loaded in this process (module doc)."""
    from tracelens.analyze.communication.collectives import analyze, link_of
    from tracelens.analyze.runs.scaling import profile
    from tracelens.analyze.summary.build import summarize
    from tracelens.loading.loader import load

    trace = load(list(paths), rules=rules, step_marker=step_marker)  # type: ignore[arg-type]
    prof = profile(trace, ", ".join(str(p) for p in paths))
    _check(prof)
    summary = summarize(trace, top=0)
    coll = analyze(trace.events, trace.meta.alignment, top=0,
                   link_gb_per_s=link_of(trace.devices))
    return _record(prof, trace.meta.steps_source, summary, coll, label, tags, recorded_at,
                   inputs, inputs_hash)


def record_job(paths: Sequence[Path], label: str, tags: dict[str, str], recorded_at: str,
               inputs: tuple[RecordedInput, ...], inputs_hash: str,
               step_marker: str | None = None, rules: object = None,
               workers: int | None = None, scheduler: str | None = None) -> RunRecord:
    """:func:`record_run` with each host file mapped on the engine (:mod:`tracelens.engine.hosts`:
    in this process, a local cluster or ``scheduler``), as ``compare``, ``summarize`` and
    ``collectives`` run there: the profile's rounds
    (:func:`tracelens.analyze.runs.profile_parts.run_profile`), then one more read of every
    host for the summary and collectives partials (one :func:`tracelens.engine.hosts.run_tasks`)."""
    from tracelens.analyze.communication.collective_parts import (
        CollectivesAnalysis,
        CollectivesOptions,
    )
    from tracelens.analyze.runs.profile_parts import run_profile
    from tracelens.analyze.summary.build import SummaryAnalysis
    from tracelens.analyze.summary.types import SummaryOptions
    from tracelens.engine.cluster import engine_client
    from tracelens.engine.hosts import (
        EngineOptions,
        LoadOptions,
        engine_workers,
        host_files,
        run_tasks,
    )
    from tracelens.engine.protocol import Task

    found = host_files(list(paths), step_marker)
    n = engine_workers(found[1], workers, scheduler)
    load = LoadOptions(rules, step_marker)  # type: ignore[arg-type]
    engine = EngineOptions(n, scheduler)
    with engine_client(n, scheduler) as client:
        prof, source = run_profile(Path(", ".join(str(p) for p in paths)), found, None, load,
                                   engine, client)
        _check(prof)
        (summary, coll), _ = run_tasks([Task(SummaryAnalysis(), SummaryOptions(top=0)),
                                        Task(CollectivesAnalysis(), CollectivesOptions(None, 0))],
                                       list(paths), load, engine, client, found=found)
    return _record(prof, source, summary, coll, label, tags,  # type: ignore[arg-type]
                   recorded_at, inputs, inputs_hash)


def _check(prof: RunProfile) -> None:
    from tracelens.analyze.runs.compare import check_comparable

    check_comparable(prof)


def _record(prof: RunProfile, steps_source: str, summary: Summary, coll: Collectives,
            label: str, tags: dict[str, str], recorded_at: str,
            inputs: tuple[RecordedInput, ...], inputs_hash: str) -> RunRecord:
    """The record from the analyses' results (module doc)."""
    from tracelens.version import __version__
    from tracelens.history.store import series_key
    from tracelens.results.summary import hardware_text

    kernels = prof.kernels.sort(["ns_per_step", "category", "program", "op", "key"],
                                descending=[True, False, False, False, False],
                                nulls_last=True).head(KERNELS_KEPT)
    hardware = hardware_text(prof.hardware)
    return RunRecord(
        label=label, recorded_at=recorded_at, tags=dict(sorted(tags.items())),
        series=series_key(tags, hardware, prof.devices), hardware=hardware,
        devices=prof.devices, hosts=prof.hosts, steps=prof.steps,
        steps_source=steps_source, step_ns=prof.step_ns,
        components=dict(prof.components), mfu=summary.headline.mfu,
        tool_version=__version__, inputs_hash=inputs_hash, inputs=inputs,
        categories=tuple(CategoryRecord(c.category, c.count, c.sum_ns, c.exclusive_ns)
                         for c in summary.category_totals),
        kernels=tuple(KernelRecord(r["category"], r["program"], r["op"], r["key"], r["name"],
                                   float(r["ns_per_step"]), float(r["count_per_step"]))
                      for r in kernels.iter_rows(named=True)),
        comm=tuple(CommRecord(t.type, t.count, t.sum_ns, t.exposed_ns) for t in coll.by_type),
        findings=tuple(FindingRecord(f.kind, f.target, f.title, f.saved_ns)
                       for f in summary.findings.items))
