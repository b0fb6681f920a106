"""``tracelens.load``: paths in, one classified, validated :class:`Trace` out.

The loader in parts: :mod:`tracelens.loading.formats` finds the trace files behind each path and
sniffs each one's format (the registry of readers); :mod:`tracelens.loading.reading` reads them
(threads or processes, never oversubscribed) and runs the stages of each file as its reader
left it (``reading.file_stages``: counter and shape costs, device identification);
:mod:`tracelens.loading.combine` joins hosts onto one clock; then :data:`STAGES`, one ordered list
of named steps, repairs, classifies, costs, aligns and marks steps. ``discover``,
``find_inputs``, ``sniff_format`` and ``combine`` are re-exported here for existing callers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import polars as pl

from tracelens.analyze.timeline.blocked import note_graph_replays
from tracelens.loading.align import align_on_collectives
from tracelens.classify import TPU_SIGNAL, RuleSet, classify
from tracelens.loading.combine import combine
from tracelens.loading.paths.copies import drop_copies
from tracelens.cost.events import annotate, hlo_kinds, op_cost_table
from tracelens.loading.formats import XSPACE_SUFFIXES, discover, find_inputs, sniff_format
from tracelens.loading.jobs import Facts as JobFacts
from tracelens.loading.jobs import check_one_job
from tracelens.loading.jobs import facts as job_facts
from tracelens.core.model import FormatFacts, Notice, Trace, validate
from tracelens.core.notices import clipped, nested
from tracelens.loading.prepare import NESTING_KEYS, assign_steps, clip_and_record
from tracelens.core.signatures import Signatures, signatures
from tracelens.loading.reading import read_all
from tracelens.loading.steps import mark_steps

__all__ = ["STAGES", "XSPACE_SUFFIXES", "combine", "discover", "find_inputs", "load",
           "sniff_format"]


@dataclass
class Context:
    """What the stages share beyond the trace: the caller's options and what reading found."""

    rules: RuleSet | None = None
    step_marker: str | None = None
    notes: list[Notice] = field(default_factory=list)  # discovery notes, warned first
    format_facts: list[FormatFacts] = field(default_factory=list)  # the readers', per file
    costs: tuple[pl.DataFrame, list[Notice]] | None = None  # the HLO op cost table, once
    signatures: Signatures | None = None  # the events' kernels, from classify to costs


def load(paths: str | Path | Sequence[str | Path], rules: RuleSet | None = None,
         progress: Callable[[Iterable[Path]], Iterable[Path]] | None = None,
         step_marker: str | None = None) -> Trace:
    """Read every trace behind ``paths`` into one classified Trace.

    ``step_marker`` is a regex: host markers (rocprofv3 ROCTx ranges, XSpace host
    annotations) whose name matches it become steps, else the executions of a program whose
    module name matches it (:mod:`tracelens.loading.steps`; ``meta.steps_source`` says which).

    Raises :class:`TraceInputError` for any input that cannot be read; nothing partial is
    returned.
    """
    args, files, origin, notes = discover_files(paths, step_marker)
    parts = read_all(files, [sniff_format(f) for f in files], step_marker, progress)
    if len(parts) > 1:
        check_one_job([job_facts(part, f, origin[f], args[origin[f]].is_dir())
                       for f, part in zip(files, parts)], args)
    return finish(parts, Context(rules=rules, step_marker=step_marker, notes=notes))


def discover_files(paths: str | Path | Sequence[str | Path], step_marker: str | None = None
                   ) -> tuple[list[Path], list[Path], dict[Path, int], list[Notice]]:
    """(the path arguments, the trace files behind them, each file's first argument, the
    discovery notes): what ``load`` reads, decided before any file is opened."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    if step_marker is not None:
        re.compile(step_marker)  # a bad pattern is the caller's error, not the file's
    args = [Path(p) for p in paths]
    origin: dict[Path, int] = {}  # each file's first path argument
    notes: list[Notice] = []
    for i, arg in enumerate(args):
        found, skipped = discover(arg)
        notes += skipped
        for f in found:
            origin.setdefault(f, i)
    files, copies = drop_copies(list(origin))  # a copy beside a trace is not another host
    return args, files, {f: origin[f] for f in files}, notes + copies


def load_host(path: Path, arg: int, in_dir: bool, rules: RuleSet | None = None,
              step_marker: str | None = None, threads: int | None = None,
              notes: Sequence[Notice] = ()) -> tuple[Trace, JobFacts]:
    """One trace file of a job, read and staged on its own (the engine's per-host map), and
    its job-check facts (taken before the stages, as ``load`` takes them). ``arg``,
    ``in_dir``: its path argument's index and whether that is a directory; ``threads``: the
    decoder threads it may use; ``notes``: discovery notes to warn after its own warnings."""
    part = read_all([path], [sniff_format(path)], step_marker, threads=threads)[0]
    found = job_facts(part, path, arg, in_dir)
    ctx = Context(rules=rules, step_marker=step_marker, notes=list(notes))
    return finish([part], ctx), found


def finish(parts: list[Trace], ctx: Context) -> Trace:
    """The parts combined onto one clock and through every stage."""
    ctx.format_facts = [f for part in parts for f in part.meta.format_facts]
    trace = combine(parts)
    for _, stage in STAGES:
        stage(trace, ctx)
    return trace


def _discovery_notes(trace: Trace, ctx: Context) -> None:
    for note in ctx.notes:
        trace.meta.warn(note)
    if ctx.format_facts:
        trace.meta.format_facts = ctx.format_facts


def _rechunk(trace: Trace, ctx: Context) -> None:
    """One chunk per event column: parts and lines arrive as many chunks, which slows every
    group-by and join below several times over (values unchanged). The host events stay as
    they came: every stage reads a few of their columns through a filter, which copies those
    anyway (2M launch calls: rechunking all nine columns first took 0.05 s and 110 MB)."""
    trace.events = trace.events.rechunk()


NESTING_VENDORS = ("cpu", "google")
"""Devices whose op lines nest (XLA:CPU, TPU): an op holding the next ones whole is a
``while``, ``conditional`` or ``call`` around its body, whose ops are the work."""


def _clip_overlaps(trace: Trace, ctx: Context) -> None:
    """Clip each activity's end to the next start of its stream, and say what that undid:
    overlaps (an in-order stream cannot run two at once) and nesting (an XLA:CPU op holding
    the next ones whole: a while, conditional or call around its body), told apart. XLA's
    own devices nest (XLA:CPU, TPU: an op line holds the control-flow ops around their
    bodies); a GPU's stream runs one kernel at a time, so there it is overlap."""
    xla = trace.devices.filter(pl.col("vendor").is_in(list(NESTING_VENDORS))).select(
        NESTING_KEYS)
    trace.events, trace.meta.clips = clip_and_record(trace.events, xla)
    overlaps = trace.meta.clips.filter(~pl.col("nested"))
    if not overlaps.is_empty():
        max_clip = int(overlaps["largest_ns"].max())  # type: ignore[arg-type]
        trace.meta.warn(clipped(int(overlaps["clipped"].sum()), max_clip))
    held = trace.meta.clips.filter(pl.col("nested"))
    if not held.is_empty():
        trace.meta.warn(nested(int(held["clipped"].sum()),
                               sorted(set(held["name"].to_list()))))


def _classify(trace: Trace, ctx: Context) -> None:
    """Categories, with what each HLO op computes (docs/definitions.md#cost-model) as the rules'
    HLO signal,
    worked out per signature (:mod:`tracelens.core.signatures`) and spread onto the events."""
    ctx.signatures = signatures(trace.events)
    keys = ctx.signatures.table
    ctx.costs = op_cost_table(keys, trace.modules)
    given = trace.events["subcategory"]
    trace.events = issued_types(
        classify(trace.events, ctx.rules,
                 (ctx.signatures, tpu_signal(keys, hlo_kinds(keys, ctx.costs[0]),
                                             trace.modules))), given)


def issued_types(events: pl.DataFrame, given: pl.Series) -> pl.DataFrame:
    """A collective's type as the op that issued it says (the reader's ``subcategory``
    where its ``type_source`` names an op: ``c10d::alltoall_base_`` run as
    ``ncclKernel_SendRecv`` is an all-to-all), over the rules' reading of the kernel name."""
    src = pl.col("type_source").cast(pl.String)
    by_op = ((pl.col("category") == "collective") & src.is_not_null()
             & (src != "kernel name") & given.is_not_null())
    if not events.select(by_op.any()).item():
        return events
    return events.with_columns(subcategory=pl.when(by_op).then(pl.lit(given))
                               .otherwise(pl.col("subcategory")))


def tpu_signal(keys: pl.DataFrame, hlo: pl.Series, modules: pl.DataFrame | None = None
               ) -> pl.Series:
    """The rules' HLO signal, a TPU op's own category first: ``tpu:<hlo_category>``
    (``tpu:convolution fusion``; the TPU block of rules.toml), XLA's category of the op, which
    XProf groups by; for a loop fusion whose HLO is in ``modules``, with its root
    (``tpu:loop fusion; root reduce``: :func:`loop_fusion_roots`); the HLO's reading of the
    instruction (the GPU rules' signal) only where the trace gives no category."""
    if "hlo_category" not in keys.columns or keys["hlo_category"].null_count() == keys.height:
        return hlo
    roots = loop_fusion_roots(keys, modules)
    own = keys.select(pl.concat_str(pl.lit(TPU_SIGNAL), pl.col("hlo_category").cast(pl.String),
                                    pl.lit(roots).fill_null("")))
    return pl.coalesce(own.to_series(), hlo.cast(pl.String)).alias(hlo.name)


LOOP_FUSION = "loop fusion"


def loop_fusion_roots(keys: pl.DataFrame, modules: pl.DataFrame | None) -> pl.Series:
    """Per row of ``keys`` (host, program_id, op, hlo_category): ``; root <opcode>`` for a
    TPU loop fusion whose fusion computation the trace's HLO holds
    (:meth:`tracelens.hlo.index.HloIndex.fusion_root`), else null. Looked up once per
    distinct op (a few hundred), not per event."""
    none = pl.Series("root", [None] * keys.height, dtype=pl.String)
    if modules is None or not modules.height or "program_id" not in keys.columns:
        return none
    loops = keys.select("host", "program_id", "op").filter(
        (keys["hlo_category"].cast(pl.String) == LOOP_FUSION)
        & keys["program_id"].is_not_null() & keys["op"].is_not_null()).unique()
    if not loops.height:
        return none
    from tracelens.hlo.index import HloIndex

    index = HloIndex.from_frames(modules, wanted=loops)
    found = loops.with_columns(root=pl.Series([
        index.fusion_root(h, p, str(o)) for h, p, o in loops.iter_rows()], dtype=pl.String))
    found = found.filter(pl.col("root").is_not_null()).with_columns(
        root=pl.concat_str(pl.lit("; root "), "root"))
    joined = keys.select("host", "program_id", "op", "hlo_category").join(
        found, on=["host", "program_id", "op"], how="left", maintain_order="left")
    return joined.select(pl.when(pl.col("hlo_category").cast(pl.String) == LOOP_FUSION)
                         .then("root"))["root"]


def _costs(trace: Trace, ctx: Context) -> None:
    """flops, bytes, dtype, cost_source, msg_bytes, ... from the table the classifier used,
    on the same signatures (the events' order is unchanged since)."""
    annotate(trace, table=ctx.costs, sig=ctx.signatures)
    ctx.signatures = None


def _align(trace: Trace, ctx: Context) -> None:
    """Hosts combine could not put on one clock: aligned on collective ends, else warned."""
    unaligned, trace.meta.unaligned = trace.meta.unaligned, None
    if unaligned and not align_on_collectives(trace):
        trace.meta.warn(unaligned)


def _steps(trace: Trace, ctx: Context) -> None:
    mark_steps(trace, ctx.step_marker)
    trace.events = assign_steps(trace.events, trace.steps)
    note_graph_replays(trace)


def _validate(trace: Trace, ctx: Context) -> None:
    problems = validate(trace)
    if problems:  # a parser bug, not a user error: fail loudly
        raise AssertionError("trace violates the model: " + "; ".join(problems))


STAGES: list[tuple[str, Callable[[Trace, Context], None]]] = [
    ("notes from discovery and reading", _discovery_notes),
    ("rechunk", _rechunk),
    ("clip same-stream overlaps", _clip_overlaps),
    ("classify", _classify),
    ("costs", _costs),
    ("align hosts on collectives", _align),
    ("steps", _steps),
    ("validate", _validate),
]
"""The post-parse pipeline, in order: each stage updates the combined trace in place."""
