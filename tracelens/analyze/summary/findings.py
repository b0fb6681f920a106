"""Findings: what to fix first, ranked across the analyses ``summarize`` runs.

The projected saving of every finding is a what-if of the critical path
(:mod:`tracelens.analyze.critical.path`: the step's graph solved again with the change),
never an estimate made here: the simulator's campaign (docs/simulator.md) is what those are
checked against. The other analyses give each finding its evidence (collectives' exposure
and stragglers, the roofline's efficiency, the idle breakdown, the HLO lens). What they find
that the solver has no projection for (a straggler off the step's path, exposure with no
critical path under filters) is listed after the projected findings, with the reason.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Sequence

from tracelens.results.findings import Findings, RankedFinding

if TYPE_CHECKING:
    from tracelens.hlo.lens import Finding
    from tracelens.results.collectives import Straggler
    from tracelens.results.critical_path import WhatIf
    from tracelens.results.summary import Summary

FLOOR_PCT = 1.0
"""A projected saving under this share of the step is too small to act on: such what-ifs
are counted in ``below_floor``, not listed."""

MEASURED_FLOOR_PCT = 1.0
"""An unprojected finding needs its measured cost (exposed time, others' waiting, launch
idle) to be at least this share of the job's summed device time."""

_PLURAL = {"unknown": "collectives of unknown type", "gemm": "GEMMs",
           "attention": "attention kernels", "convolution": "convolutions",
           "elementwise": "elementwise kernels", "reduction": "reductions",
           "memory": "memory copies", "collective": "collectives", "other": "other kernels"}
GRAPH_TITLE = "Graph-launch the step (CUDA/HIP graphs): the device waits for kernel launches"
XLA_CHANGES = ("host", "sync", "transfer", "dispatch")
"""The what-ifs of XLA host work (critical path, docs/critical-path.md#xla-host-work)."""
_DEVICE = re.compile(r"^(?P<host>.*)/[A-Za-z]+(?P<device>\d+)$")


def ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.3f}"


def plural(word: str) -> str:
    """``all-gather`` -> ``all-gathers``, ``gemm`` -> ``GEMMs`` (a collective type or a
    category; ``unknown``: a collective whose type the trace does not say)."""
    return _PLURAL.get(word, word if word.endswith("s") else word + "s")


def findings(s: "Summary", what_ifs: "Sequence[WhatIf]" = (),
             no_path: str = "no critical path for this trace") -> Findings:
    """The summary's findings: the critical path's what-ifs (all of them, not only the
    three ``summarize`` lists) made into findings with their evidence, best saving first,
    then what the analyses measured without a projection. ``no_path``: why there is no
    critical path, when ``s`` has none."""
    cp = s.critical_path
    step = cp.step if cp is not None else None
    step_ns = cp.step_ns if cp is not None else None
    projected: list[RankedFinding] = []
    below: list[str] = []
    for w in what_ifs:
        pct = 100.0 * w.saved_ns / w.step_ns if w.step_ns else None
        if pct is None or pct < FLOOR_PCT:
            below.append(f"{w.change} {w.target}")
            continue
        projected.append(_projected(s, w, pct))
    projected.sort(key=lambda f: (-(f.saved_ns or 0), f.key))
    seen = {f.key for f in projected} | set(below)
    why = (no_path if cp is None else f"not on step {step}'s critical path"
           if step is not None else "not on the trace's critical path")
    # where the path is mostly gaps nothing in the trace binds, a problem the analyses
    # measured stays listed though its what-if saves under the floor: the pinned gaps, not
    # the problem, hold the step, and the finding says so
    small = {f"{w.change} {w.target}": w.saved_ns for w in what_ifs}
    # a straggler's cost is others waiting for it: "off the path" is said of those waits (its
    # own path may be the step's, as the late device's often is)
    late_why = why if cp is None else (f"no path of step {step} waits for its arrival"
                                       if step is not None else
                                       "no path of the trace waits for its arrival")
    found, gaps = _measured(s, why, late_why), _idle_path(s)
    if any(w.change in XLA_CHANGES for w in what_ifs) or not _graphs_apply(s):
        # XLA's launches, or devices no CUDA/HIP graph runs on: no graph advice
        found = [f for f in found if f.kind != "graph_launch"]
        projected = [f for f in projected if f.kind != "graph_launch"]
    measured = [f for f in found if f.key not in seen] + [
        replace(f, unprojected=_unmoved(f, small[f.key], _path_ns(s, "idle"))) for f in found
        if gaps and f.kind in ("on_time", "hide") and f.key in small and f.key in below] \
        + (_host_bound(s) if "host host" not in seen else []) + gaps + _blocking(s, step) \
        + _host_pause(s)
    measured.sort(key=lambda f: (-_measured_ns(s, f), f.key))
    return Findings(tuple(projected + measured), step, step_ns, FLOOR_PCT, tuple(below))


def _unmoved(f: RankedFinding, saved_ns: int, idle_ns: int) -> str:
    """Why a straggler or exposed collectives the analyses measured have no projection worth
    listing on a path mostly made of gaps nothing in the trace binds (``idle_ns`` of it)."""
    what = "on time it" if f.kind == "on_time" else "overlapping them"
    return (f"{what} saves {ms(saved_ns)} ms of the step (under {FLOOR_PCT:g}%): "
            f"{ms(idle_ns)} ms of the critical path are gaps nothing in the trace binds, "
            "held where they are")



# the XLA host work what-ifs' findings: title and evidence, each with its one number (ms)
XLA_FINDINGS = {
    "host": ("Take the host's own time off the step: the device waits {} ms for the host",
             "{} ms of host time (its untraced work between its calls, and after it had the "
             "step's result)"),
    "dispatch": ("Dispatch the step as one program (jit it): the device waits for op-by-op "
                 "dispatch ({} ms)", "{} ms of host dispatch and launch latency"),
    "transfer": ("Keep the data on the device, or copy it ahead: the step waits for "
                 "host-to-device copies ({} ms)", "{} ms of transfer calls and waits for the "
                 "copies"),
    "sync": ("Stop waiting for the device every step: the host syncs, then the device waits "
             "for its work ({} ms)", "{} ms of syncs and host time after them"),
}

def _projected(s: "Summary", w: "WhatIf", pct: float) -> RankedFinding:
    """A what-if as a finding; "the path" in its evidence is the step's critical path."""
    if w.change == "hide" and w.target == "memory":
        return RankedFinding("hide", "memory", MEMORY_TITLE, w.saved_ns, pct,
                             _memory_exposure(s) + f"; {ms(w.on_path_ns)} ms on the path",
                             "tracelens summarize --all")
    if w.change == "hide":
        title = f"Overlap the {plural(w.target)} with compute"
        return RankedFinding("hide", w.target, title, w.saved_ns, pct,
                             _exposure(s, w.target) + f"; {ms(w.on_path_ns)} ms on the path"
                             + _hlo_note(s, w.target), _hlo_command(s, w.target))
    if w.change == "on_time":
        return RankedFinding("on_time", w.target, _late_title(s, w.target), w.saved_ns, pct,
                             _waited(s, w.target) + f"; {ms(w.on_path_ns)} ms of its work "
                             "and waits for it on the path", "tracelens collectives")
    if w.change == "roofline":
        eff = s.category_efficiency.get(w.target)
        what = plural(w.target)
        # over 100%: some groups run faster than their ceiling (a peak or their bytes are
        # off for them); the what-if speeds up only those under it, so the title says that
        title = (f"Speed up the {what}: they run at {eff[0]:.0%} of their attainable rate"
                 if eff and eff[0] <= 1.0 else f"Run the {what} that run below their roofline "
                 "at their attainable rate")
        rest = (f"; {eff[0]:.1%} over {eff[1]} op group{'s' if eff[1] != 1 else ''}, "
                "time-weighted" + (" (over 100%: some run above the roofline's ceiling, which "
                                   "is then too low for them)" if eff[0] > 1.0 else "")
                if eff else "")
        return RankedFinding("roofline", w.target, title, w.saved_ns, pct,
                             f"{ms(w.on_path_ns)} ms of {w.target} on the path{rest}",
                             "tracelens summarize --all")
    if w.change in XLA_FINDINGS:
        title, evidence = XLA_FINDINGS[w.change]
        return RankedFinding(w.change, w.target, title.format(ms(w.saved_ns)), w.saved_ns, pct,
                             "on the path: " + evidence.format(ms(w.on_path_ns)),
                             "tracelens critical-path")
    if w.change == "graph_launch":
        return RankedFinding(
            "graph_launch", w.target, GRAPH_TITLE, w.saved_ns, pct,
            f"on the path: {ms(w.on_path_ns)} ms of host, launches and syncs; device idle "
            f"for launches: {ms(_launch_idle(s))} ms (job)",
            "tracelens critical-path")
    return RankedFinding(w.change, w.target, f"{w.change} {w.target}", w.saved_ns, pct,
                         f"{ms(w.on_path_ns)} ms on the path", "tracelens critical-path")


def _measured(s: "Summary", why: str, late_why: str) -> list[RankedFinding]:
    """Findings the analyses measured, before the projected ones are taken out."""
    total = s.headline.totals.span_ns
    floor = MEASURED_FLOOR_PCT / 100.0 * total
    out = []
    for t in s.collectives.by_type:
        if t.exposed_ns >= floor and t.exposed_ns > 0:
            out.append(RankedFinding("hide", t.type, f"Overlap the {plural(t.type)} with "
                                     "compute", None, None, _exposure(s, t.type)
                                     + _hlo_note(s, t.type), _hlo_command(s, t.type),
                                     unprojected=why))
    for g in s.collectives.stragglers:
        if g.times_last * 2 >= g.instances and g.wait_ns >= floor and g.wait_ns > 0:
            name = _device_name(s, g.host, g.device)
            out.append(RankedFinding("on_time", name, _late_title(s, name), None, None,
                                     _waited(s, name), "tracelens collectives",
                                     unprojected=late_why))
    exposed = s.headline.totals.exposed_memory_ns
    if total and exposed >= MEMORY_SHARE * total:
        out.append(RankedFinding("hide", "memory", MEMORY_TITLE, None, None,
                                 _memory_exposure(s), "tracelens summarize --all",
                                 unprojected=why))
    launch = _launch_idle(s)
    if launch >= floor and launch > 0 and not s.replays_graphs:  # graphs: launched as such
        out.append(RankedFinding(
            "graph_launch", "host launches", GRAPH_TITLE, None, None,
            f"device idle for launches: {ms(launch)} ms (job)",
            "tracelens critical-path", unprojected=why))
    return out


def _graphs_apply(s: "Summary") -> bool:
    """Whether CUDA/HIP graphs can launch this job's work: some device is an NVIDIA or AMD GPU,
    or of a vendor the trace does not say (a TPU or an XLA:CPU device is neither)."""
    return any(d.vendor in ("nvidia", "amd", None) for d in s.devices) or not s.devices


MEMORY_TITLE = "Overlap the memory copies with compute (prefetch, async copies)"
MEMORY_SHARE = 0.10
"""Exposed memory time (copies and sets under no compute) from this share of the devices'
summed time is a finding even without a projection."""


def _memory_exposure(s: "Summary") -> str:
    t = s.headline.totals
    pct = s.headline.exposed_memory_pct
    return (f"{ms(t.exposed_memory_ns)} of {ms(t.memory_ns)} ms of memory copies exposed over "
            "the job (" + ("-" if pct is None else f"{pct:.1f}%") + " of the devices' time)")


HOST_BOUND_SHARE = 0.5
"""The path's host share from which the host itself is a finding."""


def _host_bound(s: "Summary") -> list[RankedFinding]:
    """The host's own work sets the step: most of the path is host time. No what-if moves
    the host's work itself (they move launches and syncs), so it has no projection."""
    host = _path_ns(s, "host")
    if not _share_at_least(s, host, HOST_BOUND_SHARE):
        return []
    return [RankedFinding(
        "host_bound", "host", f"Speed up the host: {_share(s, host):.0%} of the critical "
        "path is host work", None, None, _path_evidence(s, host, on_device=False),
        "tracelens critical-path",
        unprojected="the what-ifs move launches and syncs, not the host's own work")]


PAUSE_SHARE = 0.10
"""Idle between consecutive steps, per step, from this share of the headline's step is a
finding (the device waits for the host between steps)."""


def _pauses(s: "Summary") -> tuple[int, int] | None:
    """(the median device's idle between consecutive steps per step, its median step period)
    in ns: per device with at least two steps, the time between its step windows less its
    busy time outside them, over the gaps' count; None without two steps."""
    per: list[tuple[int, int]] = []
    for d in s.devices:
        sts = sorted(d.steps, key=lambda x: x.start_ns)
        if len(sts) < 2:
            continue
        between = sum(max(0, b.start_ns - a.end_ns) for a, b in zip(sts, sts[1:]))
        outside = d.timeline.busy_ns - sum(x.timeline.busy_ns for x in sts)
        idle = max(0, between - max(0, outside))
        periods = sorted(b.start_ns - a.start_ns for a, b in zip(sts, sts[1:]))
        per.append((idle // (len(sts) - 1), periods[(len(periods) - 1) // 2]))
    if not per:
        return None
    per.sort()
    return per[(len(per) - 1) // 2]


def _host_pause(s: "Summary") -> list[RankedFinding]:
    """The device idles between steps (outside every step window) for at least
    :data:`PAUSE_SHARE` of the step: the host pauses between steps (input, logging, a
    checkpoint). No path runs through it (it is in no step), so no what-if: the finding says
    the wait per step and the step period without it, both measured."""
    got = _pauses(s)
    step = s.headline.median_step_ns
    if got is None or not step or got[0] < PAUSE_SHARE * step:
        return []
    pause, period = got
    return [RankedFinding(
        "host_pause", "host", f"Remove the host's pause between steps: the device waits "
        f"{ms(pause)} ms per step for the host", None, None,
        f"steps start every {ms(period)} ms (median), each {ms(step)} ms long; the device "
        f"is idle {ms(pause)} ms between consecutive steps: without the pause a step would "
        f"come every {ms(max(0, period - pause))} ms", "tracelens summarize --all",
        unprojected="the pause lies between the step windows, on no step's critical path")]


SYNC_SHARE = 0.10
"""The path's share of waits for the host's blocking calls from which they are a finding."""


def _blocking(s: "Summary", step: int | None) -> list[RankedFinding]:
    """The device waited for the host's blocking copies and syncs (``hipMemcpyWithStream``,
    ``cudaMemcpy``, ``*Synchronize``): on the path (its ``sync``, at least
    :data:`SYNC_SHARE` of the step) or, off it, in the idle breakdown's ``sync_wait`` over
    the job (at least :data:`MEASURED_FLOOR_PCT` of the devices' time). No what-if removes
    a blocking call (the host needs what it waits for), so it has no projection; a graph
    launch does not remove it either."""
    on_path = _path_ns(s, "sync")
    job = _sync_idle(s)
    total = s.headline.totals.span_ns
    why = ("a blocking call waits for the device and holds the host: no what-if removes it; "
           "make the copy asynchronous (pinned memory, non_blocking) or move it out of the step")
    if _share_at_least(s, on_path, SYNC_SHARE):
        return [RankedFinding(
            "sync", "host", f"Remove the host's blocking copies and syncs: "
            f"{_share(s, on_path):.0%} of the critical path waits for them", None, None,
            f"{ms(on_path)} of the path's {ms(s.critical_path.step_ns)} ms; "  # type: ignore
            f"the devices waited {ms(job)} ms for blocking calls over the job",
            "tracelens summarize --all", unprojected=why)]
    if total and job >= MEASURED_FLOOR_PCT / 100.0 * total and job > 0:
        where = f"step {step}'s" if step is not None else "the trace's"
        return [RankedFinding(
            "sync", "host", "Remove the host's blocking copies and syncs: the devices wait "
            f"{ms(job)} ms for them", None, None,
            f"{ms(job)} ms of the devices' idle over the job is sync wait, "
            f"{ms(on_path)} ms of it on {where} critical path",
            "tracelens summarize --all", unprojected=why)]
    return []


def _sync_idle(s: "Summary") -> int:
    """The devices' idle waiting for the host's blocking calls over the job (the idle
    breakdown's sync wait)."""
    return sum(b.sync_wait_ns for d in s.devices if (b := d.timeline.idle_breakdown) is not None)


IDLE_SHARE = 0.10
"""The path's idle share from which the unexplained idle is a finding."""


def _idle_path(s: "Summary") -> list[RankedFinding]:
    """The step waits for nothing the trace shows: the path's ``idle`` (a gap no host call,
    event or launch in the trace binds: a device-only trace's dispatch gaps, a TPU host
    reading results). What caused it is not in the trace, so there is no what-if for it; the
    finding says how much of the step it is, rather than leave it to the headline's idle."""
    idle = _path_ns(s, "idle")
    if not _share_at_least(s, idle, IDLE_SHARE):
        return []
    return [RankedFinding(
        "idle", "device", f"Find what the device waits for: {_share(s, idle):.0%} of the "
        "critical path is idle", None, None, _path_evidence(s, idle, on_device=True),
        "tracelens summarize --all",
        unprojected="nothing in the trace binds those gaps (no host call, launch or event "
        "waits on them), so no what-if can move them")]


def _path_ns(s: "Summary", component: str) -> int:
    """``component``'s ns on the step's critical path (0 without one)."""
    cp = s.critical_path
    return sum(c.ns for c in cp.composition if c.component == component) if cp else 0


def _share_at_least(s: "Summary", ns: int, share: float) -> bool:
    cp = s.critical_path
    return cp is not None and bool(cp.step_ns) and ns >= share * cp.step_ns


def _share(s: "Summary", ns: int) -> float:
    cp = s.critical_path
    assert cp is not None and cp.step_ns
    return ns / cp.step_ns


def _path_evidence(s: "Summary", ns: int, on_device: bool) -> str:
    """``<ns> of the path's <step> ms [on <device>]; the devices are <x>% idle over the job``."""
    cp = s.critical_path
    assert cp is not None
    idle = s.headline.idle_pct
    where = f" on {_device_name(s, cp.host, cp.device)}" if on_device else ""
    return (f"{ms(ns)} of the path's {ms(cp.step_ns)} ms{where}; the devices are "
            + ("-" if idle is None else f"{idle:.1f}%") + " idle over the job")


def _measured_ns(s: "Summary", f: RankedFinding) -> int:
    """What an unprojected finding's rank is by: the time it measured."""
    if f.kind in ("host_bound", "idle"):
        return _path_ns(s, "host" if f.kind == "host_bound" else "idle")
    if f.kind == "host_pause":
        got = _pauses(s)
        return got[0] if got else 0
    if f.kind == "sync":
        return max(_path_ns(s, "sync"), _sync_idle(s))
    if f.kind == "hide" and f.target == "memory":
        return s.headline.totals.exposed_memory_ns
    if f.kind == "hide":
        return next((t.exposed_ns for t in s.collectives.by_type if t.type == f.target), 0)
    if f.kind == "on_time":
        g = _straggler(s, f.target)
        return g.wait_ns if g is not None else 0
    return _launch_idle(s)


def _device_name(s: "Summary", host: str, device: int) -> str:
    """How the critical path names a device (``<host>/GPU<d>``, ``TPU``/``CPU`` by its
    vendor; what-ifs and waits)."""
    return s.device_name(host, device)


def _straggler(s: "Summary", name: str) -> "Straggler | None":
    m = _DEVICE.match(name)
    if m is None:
        return None
    return next((g for g in s.collectives.stragglers
                 if g.host == m["host"] and g.device == int(m["device"])), None)


def _late_title(s: "Summary", name: str) -> str:
    g = _straggler(s, name)
    if g is None or not g.times_last:
        return f"Find why {name} is late: the others wait for it in collectives"
    return (f"Find why {name} is late: it arrives last in {g.times_last} of {g.instances} "
            "collectives")


def _waited(s: "Summary", name: str) -> str:
    g = _straggler(s, name)
    if g is None:
        return "its peers wait for it at collectives on the critical path"
    return f"others waited {ms(g.wait_ns)} ms for it over the job"


def _exposure(s: "Summary", kind: str) -> str:
    t = next((t for t in s.collectives.by_type if t.type == kind), None)
    if t is None:
        return f"no {kind} instances measured"
    return f"{ms(t.exposed_ns)} of {ms(t.sum_ns)} ms exposed over the job's {t.count:,} instances"


def _hlo_finding(s: "Summary", kind: str) -> "Finding | None":
    return next((f for f in s.hlo_findings if f.opcode == kind
                 and f.exposed_ns_per_step), None)


def _hlo_note(s: "Summary", kind: str) -> str:
    f = _hlo_finding(s, kind)
    if f is None:
        return ""
    return f"; HLO: {f.instruction} [{f.program}] {f.kind}, {ms(f.exposed_ns_per_step)} ms/step"


def _hlo_command(s: "Summary", kind: str) -> str:
    return "tracelens hlo" if _hlo_finding(s, kind) is not None else "tracelens collectives"


def _launch_idle(s: "Summary") -> int:
    """The devices' idle that waited for launches over the job: the idle breakdown's host
    launch and launch latency parts (what a graph launch removes)."""
    return sum(b.host_launch_ns + b.launch_latency_ns for d in s.devices
               if (b := d.timeline.idle_breakdown) is not None)
