"""The HLO lens joined to the timeline: each finding's measured cost (``tracelens hlo``).

A finding's ``exposed_ns_per_step`` is the collectives analysis's exposure
(:func:`tracelens.analyze.communication.collectives.collective_activities`: the part of each
activity no
compute kernel on its device covers) of the finding's instructions, summed over their
executions and divided by the (host, rank, device, step) pairs they ran in: exposed ns per step
per device. Activities outside every step window do not count; with none left the cost is null
with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Sequence

import polars as pl

from tracelens.analyze.communication.collectives import collective_activities
from tracelens.core.errors import TraceInputError
from tracelens.loading.formats import hlo_schedule
from tracelens.core.hlo_model import Module, Schedule
from tracelens.hlo.lens import (Finding, HostMap, ProgramLens, analyze_module, human_bytes,
                                program_label, with_exposure)
from tracelens.hlo.index import decoded_module
from tracelens.core.model import COMPUTE_CATEGORIES, Trace, shown_program_id
from tracelens.results.hlo import HloLensResult

if TYPE_CHECKING:
    from tracelens.engine.protocol import JobPlan

DEVICE_STEP = ["host", "rank", "device", "step"]


def _sort_key(f: Finding) -> tuple:
    """Findings of programs that never ran here last, then the costliest measured first."""
    return (f.executed is False, f.exposed_ns_per_step is None, -(f.exposed_ns_per_step or 0.0),
            f.bytes_per_step is None, -(f.bytes_per_step or 0), f.kind,
            f.program_id if f.program_id is not None else -1, f.instruction)


def _select(programs: list[ProgramLens], program: str | None) -> list[ProgramLens]:
    if program is None:
        return programs
    return [p for p in programs if program in (p.module, str(p.program_id),
                                                str(shown_program_id(p.program_id)))]


def trace_modules(trace: Trace) -> tuple[list[tuple[Module, Schedule | None]], list[str]]:
    """Each program of the trace once (the first host's HloProto, hosts in name order)."""
    return decode_programs(program_protos(trace.modules))


def program_protos(modules: pl.DataFrame, proto: str = "hlo_proto") -> pl.DataFrame:
    """Of the modules table, each program's first host's row (hosts in name order) with a
    program (``proto``: the column that holds it, or points at it)."""
    return modules.filter(pl.col("program_id").is_not_null() & pl.col(proto)
                          .is_not_null()).sort("program_id", "host") \
        .unique("program_id", keep="first", maintain_order=True)


def decode_programs(rows: pl.DataFrame
                    ) -> tuple[list[tuple[Module, Schedule | None]], list[str]]:
    """The modules and schedules of :func:`program_protos` rows, and what failed to decode."""
    out, problems = [], []
    for pid, name, blob in rows.select("program_id", "module", "hlo_proto").iter_rows():
        found: Module | Exception = decoded_module(blob, pid)
        if not isinstance(found, Exception):
            try:
                out.append((found, hlo_schedule(blob)))
                continue
            except Exception as exc:  # a damaged module is that module's problem
                found = exc
        problems.append(f"HLO of module {program_label(name, pid)} could not be decoded "
                        f"({type(found).__name__}: {found})")
    return out, problems


def trace_hosts(trace: Trace) -> HostMap:
    """One host: nothing spans hosts. Several: unknown, the trace has no map from the HLO's
    device ids to hosts."""
    n = trace.devices["host"].n_unique() if trace.devices.height else \
        trace.events["host"].n_unique()
    return HostMap(hosts=n) if n == 1 else HostMap(hosts=n or None)


def _activities(trace: Trace, acts: pl.DataFrame | None = None) -> pl.DataFrame:
    return lens_activities(acts if acts is not None else collective_activities(trace.events))


def lens_activities(acts: pl.DataFrame) -> pl.DataFrame:
    """The columns of collective activities the lens reads."""
    return acts.select("program_id", "op", *DEVICE_STEP, "exposed_ns")


def measured(acts: pl.DataFrame, program_id: int | None | Sequence[int | None],
             names: tuple[str, ...]) -> tuple[float | None, str]:
    """Exposed ns per step per device of these instructions, or None and why; several
    program ids: over the executions of every one (the compilations of one module)."""
    ids = [program_id] if program_id is None or isinstance(program_id, int) else \
        list(program_id)
    mine = acts.filter(pl.col("program_id").is_in([i for i in ids if i is not None])
                       & pl.col("op").is_in(list(names)))
    if not mine.height:
        return None, "not in the trace's timeline (no collective activity of this op)"
    in_steps = mine.filter(pl.col("step").is_not_null())
    if not in_steps.height:
        return None, "its activities fall outside every step window"
    pairs = in_steps.select(DEVICE_STEP).unique().height
    return int(in_steps["exposed_ns"].sum()) / pairs, ""


@dataclass(frozen=True)
class LensTimeline:
    """What the lens reads of a trace's timeline: its programs (:func:`program_protos`), how
    many hosts, the GPU devices (host, rank, device), the (host, rank, device, step) with
    compute, and the collective activities (program_id, op, host, rank, device, step,
    exposed_ns; None in a summary partial whose own activities are the same rows, so they
    are not sent twice). Small, and per host: concatenating hosts' gives the job's."""

    programs: pl.DataFrame
    hosts: tuple[str, ...]
    gpus: pl.DataFrame
    compute: pl.DataFrame
    acts: pl.DataFrame | None
    # (host, rank, program_id) of every program with device events; None: not read
    ran: pl.DataFrame | None = None


def ran_programs(trace: Trace) -> pl.DataFrame | None:
    """(host, rank, program_id) of each program that has device events in the trace; None
    when its events carry no program ids (a frame of the lens's columns only)."""
    if "program_id" not in trace.events.columns:
        return None
    return trace.events.lazy().filter(pl.col("program_id").is_not_null()) \
        .select("host", "rank", "program_id").unique().collect().sort("host", "rank",
                                                                       "program_id")


def lens_timeline(trace: Trace, acts: pl.DataFrame | None = None) -> LensTimeline:
    hosts = trace.devices["host"] if trace.devices.height else trace.events["host"]
    return LensTimeline(
        programs=program_protos(trace.modules),
        hosts=tuple(sorted(str(h) for h in hosts.unique().to_list())),
        gpus=trace.devices.filter(pl.col("vendor").is_not_null() & (pl.col("vendor") != "cpu"))
        .select("host", "rank", "device"),
        # lazy: only the four key columns of the compute rows are read, not all of them
        compute=trace.events.lazy().filter(pl.col("category").is_in(list(COMPUTE_CATEGORIES))
                                           & pl.col("step").is_not_null()).select(DEVICE_STEP)
        .unique().collect().sort(DEVICE_STEP),
        acts=_activities(trace, acts), ran=ran_programs(trace))


def _sync_no_overlap(gpus: pl.DataFrame, compute: pl.DataFrame, acts: pl.DataFrame,
                     lens: ProgramLens) -> list[Finding]:
    """Synchronous collectives on a GPU that computes in the same step: nothing to hide behind.
    XLA:CPU has only synchronous collectives, so CPU devices are never flagged."""
    if not gpus.height:
        return []
    program = f"{lens.module}({lens.program_id})"
    out = []
    for c in lens.collectives:
        if c.is_async:
            continue
        hit = acts.filter((pl.col("program_id") == lens.program_id)
                          & pl.col("op").is_in(list(c.op_names))
                          & pl.col("step").is_not_null()) \
            .join(gpus, on=["host", "rank", "device"], how="semi") \
            .join(compute, on=DEVICE_STEP, how="semi")
        if hit.height:
            out.append(Finding(
                "no-overlap-window", program, lens.program_id, c.name,
                f"{c.name} is a synchronous {c.opcode} ({human_bytes(c.bytes)}) on a GPU that "
                "computes in the same step: nothing can hide it; let XLA make it async "
                "(start/done) with independent compute scheduled in between",
                c.bytes_per_step, instructions=c.op_names, opcode=c.opcode))
    return out


def lens_trace(trace: Trace, program: str | None = None,
               hosts: HostMap | None = None, acts: pl.DataFrame | None = None
               ) -> HloLensResult:
    """The HLO lens of every program in the trace, findings costed from its timeline.
    ``hosts`` overrides the trace's own device→host knowledge (:func:`trace_hosts`);
    ``acts``: the trace's collective activities when the caller already has them."""
    return lens_of_timeline(lens_timeline(trace, acts), program,
                            hosts if hosts is not None else trace_hosts(trace))


def lens_of_timeline(t: LensTimeline, program: str | None = None,
                     hosts: HostMap | None = None) -> HloLensResult:
    """:func:`lens_trace` of what it reads from the trace (see :class:`LensTimeline`)."""
    modules, problems = decode_programs(t.programs)
    n = len(t.hosts)
    hosts = hosts if hosts is not None else HostMap(hosts=n) if n == 1 else \
        HostMap(hosts=n or None)
    ran = None if t.ran is None or not t.ran.height else \
        set(t.ran["program_id"].unique().to_list())
    programs = [replace(p, executed=None if ran is None else p.program_id in ran)
                for p in _select([analyze_module(m, s, hosts) for m, s in modules], program)]
    found = [(lens, f) for lens in programs
             for f in [*lens.findings, *_sync_no_overlap(t.gpus, t.compute, t.acts, lens)]]

    def cost(ids: tuple[int | None, ...], names: tuple[str, ...], executed: bool | None
             ) -> tuple[float | None, str]:
        if executed is False:
            return None, ("its program never ran in this trace (no device events of program "
                          + ", ".join(str(i) for i in ids) + ")")
        return measured(t.acts, ids, names)

    return HloLensResult(tuple(programs), merge_compilations(found, cost), True,
                         tuple(problems))


def merge_compilations(found: list[tuple[ProgramLens, Finding]],
                       cost: Callable[[tuple[int | None, ...], tuple[str, ...], bool | None],
                                      tuple[float | None, str]]) -> tuple[Finding, ...]:
    """One finding per (module, kind, instruction) over the compilations of the module (a
    jitted function compiled for two shapes is two programs with the same findings), sorted.
    The message and bytes are those of the first compilation that ran (else the first),
    the cost ``cost(program ids, instructions, executed)`` is over all of them."""
    groups: dict[tuple[str, str, str], list[tuple[ProgramLens, Finding]]] = {}
    for lens, f in found:
        groups.setdefault((lens.module, f.kind, f.instruction), []).append((lens, f))
    out = []
    for group in groups.values():
        ran = [lens.executed for lens, _ in group]
        lens, first = min(group, key=lambda lf: (lf[0].executed is not True,
                                                 lf[0].executed is None, _pid(lf[0])))
        executed = True if True in ran else None if None in ran else False
        ids = tuple(sorted({lf[0].program_id for lf in group}, key=lambda i: -1 if i is None
                           else i))
        names = tuple(sorted({n for _, f in group for n in f.instructions}))
        exposed, note = cost(ids, names or first.instructions, executed)
        out.append(replace(with_exposure(first, exposed, note), program_ids=ids,
                           executed=executed))
    return tuple(sorted(out, key=_sort_key))


def _pid(lens: ProgramLens) -> int:
    return -1 if lens.program_id is None else lens.program_id


def lens_dump(modules: list[tuple[Module, Schedule | None]], program: str | None = None,
              hosts: HostMap | None = None) -> HloLensResult:
    """Static findings of HLO dumps (no timings: every measured cost is null)."""
    hosts = hosts if hosts is not None else HostMap()
    programs = _select([analyze_module(m, s, hosts) for m, s in modules], program)
    findings = merge_compilations([(p, f) for p in programs for f in p.findings],
                                  lambda ids, names, ran: (None, "an HLO dump has no timeline"))
    return HloLensResult(tuple(programs), findings, False)


def top_findings(trace: Trace, top: int = 3, acts: pl.DataFrame | None = None
                 ) -> list[Finding]:
    """The ``top`` findings of a loaded trace by measured exposed time per step (for
    ``summarize``); empty when the trace carries no HLO."""
    if not trace.modules.height:
        return []
    return list(lens_trace(trace, acts=acts).findings[:top])


def finding_for(findings: list[Finding] | tuple[Finding, ...],
                collective_type: str) -> str | None:
    """The one-line description of the costliest finding about a collective of this type
    (``all-reduce``, ...), for ``scaling``'s exposed-communication causes; None when none."""
    for f in findings:
        if f.opcode == collective_type:
            return f.message
    return None


def require_programs(result: HloLensResult, path: object, program: str | None) -> None:
    """A ``--program`` that matches nothing is an input error, not an empty report."""
    if program is not None and not result.programs:
        raise TraceInputError(path, f"no program named or numbered {program!r} in it")


@dataclass(frozen=True)
class LensOptions:
    """``hlo``'s options on a trace: one program (name or id) or all, and the device-to-host
    map (None: the job's own hosts)."""

    program: str | None = None
    hosts: HostMap | None = None


def _stack(frames: list[pl.DataFrame]) -> pl.DataFrame:
    frames = [f for f in frames if f.width]
    return pl.concat(frames, how="vertical_relaxed") if len(frames) > 1 else frames[0]


def concat_lens(parts: Sequence[LensTimeline | None]) -> LensTimeline | None:
    """The lens inputs of several parts of one job (hosts distinct)."""
    found = [t for t in parts if t is not None]
    if len(found) <= 1:
        return found[0] if found else None
    return LensTimeline(
        programs=program_protos(_stack([t.programs for t in found])),
        hosts=tuple(sorted({h for t in found for h in t.hosts})),
        gpus=_stack([t.gpus for t in found]),
        compute=_stack([t.compute for t in found]),
        acts=_stack([t.acts for t in found if t.acts is not None]),
        ran=None if any(t.ran is None for t in found) else _stack([t.ran for t in found
                                                                   if t.ran is not None]))


class LensAnalysis:
    """The HLO lens of a job on the Analysis protocol: each host's :class:`LensTimeline`,
    placed (ranks, host names; step numbers and exposed times do not depend on the clock, so
    no shift applies) and joined, then :func:`lens_of_timeline`."""

    def partial(self, trace: Trace, options: LensOptions) -> LensTimeline:
        return lens_timeline(trace)

    def merge(self, parts: Sequence[LensTimeline], plan: "JobPlan") -> LensTimeline:
        from tracelens.loading.combine import place

        placed = [replace(t, programs=place(t.programs, w), gpus=place(t.gpus, w),
                          compute=place(t.compute, w), acts=place(t.acts, w),
                          ran=None if t.ran is None else place(t.ran, w),
                          hosts=(w.host,) if w.host is not None else t.hosts)
                  for t, w in zip(parts, plan.placements)]
        return concat_lens(placed)

    def finish(self, part: LensTimeline, options: LensOptions) -> HloLensResult:
        return lens_of_timeline(part, options.program, options.hosts)
