"""The consistency gate: every explanation checked against the measured facts of its window.

The critical path and its what-ifs come from a graph the trace is read into; the timeline
breakdown, the idle breakdown and the collectives' arrivals are measured on the trace's
activities directly (:mod:`tracelens.analyze.timeline.breakdown`,
:mod:`tracelens.analyze.timeline.idle`, :mod:`tracelens.analyze.communication.collectives`).
Where the two disagree the explanation is wrong, not the measurement: the gate says which
fact contradicts it (a :class:`Violation`), and ``summarize`` marks the finding it contradicts
instead of presenting it as a plain one.

The facts are per device, over the same window as the critical path
(:func:`~tracelens.analyze.critical.graph.windows`), computed per host where its file is
read (:func:`window_facts`, a few rows a device) and placed in the job like every part
(:func:`merge_facts`). The checks (docs/critical-path.md, "The consistency gate"):

- ``path_idle``: a path's ``idle`` <= the idle of the devices it visits (its own and those
  it waits for) in the window; a nested op (``while``) is busy time there; another rank's
  device counts the path's window outside its own as idle;
- ``path_host``: a path's ``host`` <= the same devices' idle (a host holds a step only while
  its device has nothing to run);
- ``hide``: hiding a collective type (or the path's memory copies: ``hide memory``) saves <=
  that type's exposed time (exposed memory time) on the step path's
  devices in the window;
- ``graph_launch``: saves <= the step path's devices' idle waiting for launches (the idle
  breakdown's host launch and launch latency), and nothing where most of their launched
  work was launched by graph replays already;
- ``on_time``: saves <= the time the others waited for that participant in the window (per
  collective instance it alone arrived last at, the longest wait for it inside a waiter's
  window);
- ``nothing_to_fix``: no findings never stands beside an exposure (communication or memory),
  idle or waiting for a straggler over 10% of a device's window;
- ``step``: the findings' step is the headline's step (its length the headline's median).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence

import polars as pl

from tracelens.results.consistency import Consistency, Violation

if TYPE_CHECKING:
    from tracelens.analyze.critical.graph import WindowChoice
    from tracelens.core.model import Trace
    from tracelens.engine.protocol import JobPlan
    from tracelens.results.critical_path import CriticalPathResult, DevicePath
    from tracelens.results.findings import Findings
    from tracelens.results.summary import Summary

PATH_CHECKS = ("path_idle", "path_host", "hide", "graph_launch", "on_time")
FINDINGS_CHECKS = ("nothing_to_fix", "step")
NOTHING_SHARE = 0.10
"""A measured exposure, idle or straggler wait from this share of a device's window on
stands against "nothing found to fix"."""
GRAPH_SHARE = 0.5
"""From this share of a device's launched work launched by graph replays, the device's
launches are a graph's already: a graph-launch what-if has nothing to replace."""
_DEVICE = re.compile(r"^(?P<host>.*)/[A-Za-z]+(?P<device>\d+)$")

DEVICE_FACTS: dict[str, pl.DataType] = {
    "host": pl.String, "rank": pl.Int32, "device": pl.Int32, "step": pl.Int32,
    "start_ns": pl.Int64, "end_ns": pl.Int64, "span_ns": pl.Int64, "busy_ns": pl.Int64,
    "idle_ns": pl.Int64, "exposed_comm_ns": pl.Int64, "exposed_memory_ns": pl.Int64,
    "host_launch_ns": pl.Int64, "launch_latency_ns": pl.Int64, "sync_wait_ns": pl.Int64,
    "no_host_data_ns": pl.Int64, "launched_ns": pl.Int64, "graph_ns": pl.Int64}
"""Per device and window: the timeline (docs/definitions.md#timeline), the idle breakdown
(#idle-breakdown), and the time of its activities with a launch call in the trace
(``launched_ns``), of them launched by a graph replay (``graph_ns``)."""
EXPOSED_FACTS: dict[str, pl.DataType] = {
    "host": pl.String, "rank": pl.Int32, "device": pl.Int32, "type": pl.String,
    "exposed_ns": pl.Int64}
ARRIVAL_FACTS: dict[str, pl.DataType] = {
    "host": pl.String, "rank": pl.Int32, "device": pl.Int32, "instance": pl.String,
    "occurrence": pl.Int64, "start_ns": pl.Int64, "end_ns": pl.Int64}


@dataclass(frozen=True)
class WindowFacts:
    """The measured facts of one window, per device (:data:`DEVICE_FACTS`), per device and
    collective type (exposed time in the window, :data:`EXPOSED_FACTS`) and per collective
    activity overlapping the window (its instance and arrival, :data:`ARRIVAL_FACTS`)."""

    devices: pl.DataFrame
    exposed: pl.DataFrame
    arrivals: pl.DataFrame


def window_facts(trace: "Trace", choice: "WindowChoice") -> WindowFacts:
    """The facts of ``trace`` over the window ``choice`` picks on each rank (the critical
    path's own)."""
    from tracelens.analyze.communication.collectives import _ACTIVITY_READS, collective_activities
    from tracelens.analyze.critical.graph import windows
    from tracelens.analyze.timeline.idle import IDLE_PARTS, idle_breakdowns
    from tracelens.analyze.timeline.breakdown import clip_to_windows, step_breakdown
    from tracelens.core.instances import with_instance_keys

    win = windows(trace, choice)
    if win.is_empty() or trace.events.is_empty():
        return _empty()
    # the window as a step (-1: none) so that the timeline and idle breakdowns cut it alike
    steps = win.select("rank", step=pl.col("step").fill_null(-1), start_ns="start_ns",
                       end_ns="end_ns")
    # the columns the timeline, idle and collective passes read, not every event column
    cols = [c for c in dict.fromkeys([*_ACTIVITY_READS, "correlation_id"])
            if c in trace.events.columns]
    ev = trace.events.select(cols).join(win.select("host", "rank"), on=["host", "rank"])
    keys = ["host", "rank", "device", "step"]
    if ev.is_empty():
        return _empty()
    active = ev.select("host", "rank", "device").unique()
    tl = step_breakdown(ev, steps, active).timeline
    idle = idle_breakdowns(ev, trace.host_events, [(steps, None)])[0]
    parts = [f"{p}_ns" for p in IDLE_PARTS]
    cut = clip_to_windows(ev, steps)
    launched = _launched(cut, trace.host_events)
    dev = tl.join(idle.select(*keys, *parts), on=keys, how="left").join(
        launched, on=keys, how="left").with_columns(
        [pl.col(c).fill_null(0) for c in (*parts, "launched_ns", "graph_ns")])
    dev = dev.with_columns(step=pl.when(pl.col("step") >= 0).then(pl.col("step")),
                           host=pl.col("host").cast(pl.String))
    acts = collective_activities(cut)
    exposed = acts.group_by("host", "rank", "device", "type").agg(
        exposed_ns=pl.col("exposed_ns").sum()).with_columns(host=pl.col("host").cast(pl.String))
    # instances are counted over the whole trace (the k-th execution matches across hosts),
    # then kept where the activity overlaps its rank's window (a participant that waits does
    # so inside its activity: one that started before the window and waited into it counts)
    keyed = with_instance_keys(trace.events.select(
        "host", "rank", "device", "start_ns", "end_ns", "category", "subcategory", "op",
        "module"))
    arr = keyed.join(win.select("host", "rank", _w0="start_ns", _w1="end_ns"),
                     on=["host", "rank"]).filter(
        (pl.col("start_ns") < pl.col("_w1")) & (pl.col("end_ns") > pl.col("_w0")))
    arr = arr.select("host", "rank", "device", instance="instance_key",
                     occurrence="occurrence", start_ns="start_ns", end_ns="end_ns") \
        .with_columns(host=pl.col("host").cast(pl.String))
    return WindowFacts(dev.select(list(DEVICE_FACTS)).cast(DEVICE_FACTS),  # type: ignore
                       exposed.select(list(EXPOSED_FACTS)).cast(EXPOSED_FACTS),  # type: ignore
                       arr.select(list(ARRIVAL_FACTS)).cast(ARRIVAL_FACTS))  # type: ignore


def _launched(cut: pl.DataFrame, host_events: pl.DataFrame) -> pl.DataFrame:
    """Per device and window: the time of its activities with a launch call (same host,
    rank and correlation id), and of those launched by a graph replay (a ``*GraphLaunch``
    call)."""
    calls = host_events.filter(pl.col("correlation_id").is_not_null()).group_by(
        "host", "rank", "correlation_id").agg(
        graph=pl.col("name").cast(pl.String).str.contains("(?i)graphlaunch").any())
    got = cut.filter(pl.col("correlation_id").is_not_null()).join(
        calls, on=["host", "rank", "correlation_id"])
    dur = pl.col("end_ns") - pl.col("start_ns")
    return got.group_by("host", "rank", "device", "step").agg(
        launched_ns=dur.sum(), graph_ns=dur.filter(pl.col("graph")).sum()).with_columns(
        host=pl.col("host").cast(cut.schema["host"]))


def _empty() -> WindowFacts:
    return WindowFacts(pl.DataFrame(schema=DEVICE_FACTS), pl.DataFrame(schema=EXPOSED_FACTS),
                       pl.DataFrame(schema=ARRIVAL_FACTS))


def merge_facts(parts: Sequence[WindowFacts], plan: "JobPlan") -> WindowFacts:
    """The hosts' facts placed in the job (ranks, host names, clock shifts)."""
    if not parts:
        return _empty()
    return WindowFacts(*(plan.concat([getattr(p, name) for p in parts]).cast(schema)
                         for name, schema in (("devices", DEVICE_FACTS),
                                              ("exposed", EXPOSED_FACTS),
                                              ("arrivals", ARRIVAL_FACTS))))


# -- the checks -----------------------------------------------------------------------------

def ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


Key = tuple[str, "int | None", int]
"""A device as an explanation names it: (host, rank, device); rank None where only the host
and ordinal are known (a wait's label, an activity): every rank's device of that name."""


@dataclass(frozen=True)
class _Job:
    """The facts as lookups: per (host, rank, device) its window's row and, per collective
    type, its exposed time; per (host, device) the others' waiting for it."""

    device: dict[tuple[str, int, int], dict[str, int]]
    exposed: dict[tuple[str, int, int, str], int]
    waited_for: dict[tuple[str, int], int]

    @staticmethod
    def of(facts: WindowFacts) -> "_Job":
        dev = {(r["host"], r["rank"], r["device"]): r
               for r in facts.devices.iter_rows(named=True)}
        exp = {(h, r, d, t): int(x) for h, r, d, t, x in facts.exposed.select(
            "host", "rank", "device", "type", "exposed_ns").iter_rows()}
        return _Job(dev, exp, _waited_for(facts.arrivals, facts.devices))

    def keys(self, devices: Sequence[Key]) -> list[tuple[str, int, int]]:
        """The facts' devices the keys name, each once."""
        out = [k for h, r, d in devices for k in self.device
               if k[0] == h and k[2] == d and (r is None or k[1] == r)]
        return list(dict.fromkeys(out))

    def total(self, devices: Sequence[tuple[str, int, int]], col: str) -> int:
        return sum(int(self.device[d][col]) for d in devices)

    def idle_in(self, devices: Sequence[tuple[str, int, int]], w0: int, w1: int) -> int:
        """The most the devices can have been idle in the window [w0, w1): each one's idle in
        its own rank's window, and all of [w0, w1) outside that window (the facts do not
        cover it: a device of another rank whose window starts later had not begun)."""
        out = 0
        for d in devices:
            r = self.device[d]
            out += int(r["idle_ns"]) + max(0, min(r["start_ns"], w1) - w0) \
                + max(0, w1 - max(r["end_ns"], w0))
        return out


def _waited_for(arrivals: pl.DataFrame, devices: pl.DataFrame) -> dict[tuple[str, int], int]:
    """Per device: over the instances it alone arrived last at, the longest wait of another
    participant for it (from its own start to the last one's: the arrival skew of
    docs/definitions.md#collectives) inside that participant's window, summed: what the
    others waited for it in the window."""
    inst = ["instance", "occurrence"]
    win = devices.select("host", "rank", "device", _w0="start_ns", _w1="end_ns")
    a = arrivals.join(win, on=["host", "rank", "device"], how="left").with_columns(
        n=pl.len().over(inst), last=pl.col("start_ns").max().over(inst)).with_columns(
        at_last=(pl.col("start_ns") == pl.col("last")).sum().over(inst),
        # this participant's wait for the last arrival, inside its own window
        wait=pl.max_horizontal(pl.min_horizontal(pl.col("last"), pl.col("_w1"))
                               - pl.max_horizontal(pl.col("start_ns"), pl.col("_w0")),
                               pl.lit(0)))
    keep = (pl.col("n") > 1) & (pl.col("at_last") == 1)
    late = a.filter(keep & (pl.col("start_ns") == pl.col("last"))).select(
        *inst, "host", "device")
    waits = a.filter(keep & (pl.col("start_ns") < pl.col("last"))).group_by(inst).agg(
        w=pl.col("wait").max())
    got = late.join(waits, on=inst).group_by("host", "device").agg(w=pl.col("w").sum())
    return {(h, d): int(w) for h, d, w in got.iter_rows()}


def _visited(p: "DevicePath") -> list[Key]:
    """The devices a path runs through: its own and those it waits for (below a wait the
    walk goes on in that participant's history). Not read from its activities, which only
    some outputs list: every format checks the same."""
    out: list[Key] = [(p.host, p.rank, p.device)]
    for c in p.composition:
        if c.component.startswith("wait:") and (m := _DEVICE.match(c.component[5:])):
            out.append((m["host"], None, int(m["device"])))
    return list(dict.fromkeys(out))


def _label(p: "DevicePath", ranked: bool = False) -> str:
    """``host/GPU3``, with `` rank R`` where two ranks' devices have that name."""
    return f"{p.host}/{p.kind}{p.device}" + (f" rank {p.rank}" if ranked else "")


def _names(devices: Sequence[tuple[str, int, int]], kind: str, ranked: bool) -> str:
    return ", ".join(f"{h}/{kind}{d}" + (f" rank {r}" if ranked else "")
                     for h, r, d in devices)


def _ranked(job: _Job) -> bool:
    """Whether two ranks of one host name have a device of the same ordinal (processes of
    one machine whose trace names no host): the labels then say the rank."""
    return len({(h, d) for h, _, d in job.device}) < len(job.device)


def _step_path(res: "CriticalPathResult") -> "DevicePath | None":
    """The step's path: the one ``summarize`` shows (critical_walk.step_path_key)."""
    from tracelens.analyze.critical.walk import step_path_key

    return max(res.paths, default=None, key=lambda p: step_path_key(
        p.length_ns, p.idle_after_ns, p.rank, p.device))


def check_paths(res: "CriticalPathResult", facts: WindowFacts) -> Consistency:
    """The checks of the paths' shares and of the what-ifs (module doc)."""
    job = _Job.of(facts)
    out: list[Violation] = []
    ranked = _ranked(job)
    for p in res.paths:
        seen = job.keys(_visited(p))
        if not seen:
            continue
        idle = job.idle_in(seen, p.window.start_ns, p.window.end_ns)
        where = (f"{_names(seen, p.kind, ranked)} {'was' if len(seen) == 1 else 'were'} idle "
                 f"{ms(idle)} ms of the window ({ms(job.total(seen, 'span_ns'))} ms"
                 + (" summed" if len(seen) > 1 else "") + ")")
        for comp, check in (("idle", "path_idle"), ("host", "path_host")):
            ns = sum(c.ns for c in p.composition if c.component == comp)
            if ns > idle:
                # a share is what removing it could save: the devices' own work stays
                why = ("the rest of that time was device work" if comp == "idle" else
                       "a faster host saves at most that, the device's work stays")
                what = "idle" if comp == "idle" else "host work"
                out.append(Violation(check, f"path {_label(p, ranked)}", ns, idle,
                                     f"{ms(ns)} ms of the path is {what}, but {where}: "
                                     f"{why}"))
    if not res.paths:
        return Consistency(PATH_CHECKS, tuple(out))
    step = _step_path(res)
    assert step is not None
    # a what-if changes every device: its bound is on the devices the step path runs through,
    # those of its activities too (a pipeline's path crosses stages at transfers, no wait)
    seen = job.keys([*_visited(step), *((a.host, None, a.device) for a in step.activities
                                        if a.device is not None)])
    names = _names(seen, step.kind, ranked)
    for w in res.what_if:
        subject = f"{w.change} {w.target}"
        if w.saved_ns <= 0 or not seen:
            continue
        if w.change == "hide" and w.target == "memory":  # the path's copies in no time
            bound = job.total(seen, "exposed_memory_ns")
            if w.saved_ns > bound:
                out.append(Violation("hide", subject, w.saved_ns, bound,
                                     f"saves {ms(w.saved_ns)} ms, but memory work was "
                                     f"exposed {ms(bound)} ms on {names} in the window"))
        elif w.change == "hide":
            bound = sum(job.exposed.get((*k, w.target), 0) for k in seen)
            if w.saved_ns > bound:
                out.append(Violation("hide", subject, w.saved_ns, bound,
                                     f"saves {ms(w.saved_ns)} ms, but the {w.target}s were "
                                     f"exposed {ms(bound)} ms on {names} in the window"))
        elif w.change == "graph_launch":
            bound = job.total(seen, "host_launch_ns") + job.total(seen, "launch_latency_ns")
            graph, launched = job.total(seen, "graph_ns"), job.total(seen, "launched_ns")
            if launched and graph >= GRAPH_SHARE * launched:
                out.append(Violation("graph_launch", subject, w.saved_ns, 0,
                                     f"saves {ms(w.saved_ns)} ms, but {ms(graph)} of the "
                                     f"{ms(launched)} ms launched on {names} were graph "
                                     "replays already"))
            elif w.saved_ns > bound:
                out.append(Violation("graph_launch", subject, w.saved_ns, bound,
                                     f"saves {ms(w.saved_ns)} ms, but {names} waited "
                                     f"{ms(bound)} ms for launches in the window"))
        elif w.change == "on_time":
            m = _DEVICE.match(w.target)
            bound = job.waited_for.get((m["host"], int(m["device"])), 0) if m else 0
            if w.saved_ns > bound:
                out.append(Violation("on_time", subject, w.saved_ns, bound,
                                     f"saves {ms(w.saved_ns)} ms, but the others waited "
                                     f"{ms(bound)} ms for {w.target} in the window"))
    return Consistency(PATH_CHECKS, tuple(out))


def check_findings(s: "Summary", f: "Findings", facts: WindowFacts) -> Consistency:
    """The checks of the findings as a whole (module doc): "nothing found to fix" and the
    step."""
    out: list[Violation] = []
    job = _Job.of(facts)
    if not f.items:
        worst: tuple[float, str, int, int] | None = None
        for (h, _, d), r in job.device.items():
            span = int(r["span_ns"])
            if span <= 0:
                continue
            for what, ns in (("exposed communication", r["exposed_comm_ns"]),
                             ("exposed memory", r["exposed_memory_ns"]),
                             ("idle", r["idle_ns"]),
                             ("others' waiting for it", job.waited_for.get((h, d), 0))):
                if ns > NOTHING_SHARE * span and (worst is None or ns / span > worst[0]):
                    worst = (ns / span, f"{s.device_name(h, d)} {what}", int(ns), span)
        if worst is not None:
            share, what, ns, span = worst
            out.append(Violation("nothing_to_fix", "findings", 0, ns,
                                 f"nothing found to fix, but {what} is {ms(ns)} of its "
                                 f"{ms(span)} ms window ({share:.1%}, over "
                                 f"{NOTHING_SHARE:.0%})"))
    head = s.headline.median_step_ns
    which = "the trace" if f.step is None else f"step {f.step}"
    if f.step_ns is not None and head is not None and f.step_ns != head:
        out.append(Violation("step", "findings", f.step_ns, head,
                             f"the findings' step ({which}, {f.step_ns / 1e6:,.6f} ms) is not "
                             f"the headline's (median {head / 1e6:,.6f} ms)"))
    return Consistency(FINDINGS_CHECKS, tuple(out))


def joined(*found: Consistency) -> Consistency:
    return Consistency(tuple(c for x in found for c in x.checks),
                       tuple(v for x in found for v in x.violations))


def gate_result(res: "CriticalPathResult", facts: WindowFacts | None) -> "CriticalPathResult":
    """``critical-path``'s result with its consistency (no facts: no checks run)."""
    if facts is None:
        return res
    return replace(res, consistency=check_paths(res, facts))


def gate_findings(s: "Summary", res: "CriticalPathResult | None", facts: WindowFacts | None
                  ) -> "Summary":
    """``summarize``'s result with its consistency, and each finding an explanation it
    contradicts marked (``inconsistent``: the fact against it): a projected finding by its
    what-if, the path's idle and host findings by the step path's shares, every finding by
    a step that is not the headline's."""
    if facts is None:
        return s
    found = joined(check_paths(res, facts) if res is not None else Consistency(),
                   check_findings(s, s.findings, facts))
    fact = {(v.check, v.subject): v.fact for v in reversed(found.violations)}  # the first
    what_if = {v.subject: v.fact for v in reversed(found.violations)
               if v.check in ("hide", "graph_launch", "on_time")}
    step = _step_path(res) if res is not None else None
    step_path = f"path {_label(step, _ranked(_Job.of(facts)))}" if step is not None else ""
    share = {"idle": fact.get(("path_idle", step_path)),
             "host_bound": fact.get(("path_host", step_path))}
    step = fact.get(("step", "findings"))
    items = []
    for x in s.findings.items:
        against = (what_if.get(x.key) if x.saved_ns is not None else share.get(x.kind)) \
            or step
        items.append(replace(x, inconsistent=against) if against is not None else x)
    return replace(s, findings=replace(s.findings, items=tuple(items)), consistency=found)

