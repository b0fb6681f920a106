"""The real counterfactual runs (``sample_traces/real_runs``) as cases: what each run planted,
which finding names that cause, and which what-if removes it, checked against the measured step
of the same program run without the cause. Shared by ``tests/test_real_runs.py`` and the error
table in ``benchmarks/RESULTS.md`` (``python -m tests.real_runs_cases`` prints it).

A case passes (a) when the first finding ``summarize`` lists names the planted cause, and (b)
when the what-if that removes it projects the counterpart's measured step (median of its 12
traced steps) within 10% or 1 ms. The projection is the step ``summarize``'s findings are on,
less the matching finding's saving; where no finding with a saving matches, the matching
what-if of ``critical-path`` on that step (all of them, also those under the findings' 1%
floor); where none matches, there is no projection and (b) fails.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1] / "sample_traces" / "real_runs"
TOLERANCE = 0.10
TOLERANCE_NS = 1_000_000

Match = Callable[[str, str], bool]
"""(kind or change, target) -> whether a finding or what-if names the planted cause."""


def _host(kind: str, target: str) -> bool:
    """The device waiting for the host (its pause, its own work): a host finding, never the
    graph-launch advice (which moves launches, not the host's time)."""
    return "launch" not in kind and ("host" in kind or target == "host")


def _sync(kind: str, target: str) -> bool:
    return "sync" in kind or target == "sync" or _host(kind, target)


def _transfer(kind: str, target: str) -> bool:
    """An exposed host-to-device copy (not the roofline of device copies)."""
    return kind != "roofline" and bool(re.search(r"memory|copy|transfer|h2d|memcpy",
                                                 f"{kind} {target}"))


def _dispatch(kind: str, target: str) -> bool:
    return bool(re.search(r"launch|dispatch|eager|jit", kind)) or _host(kind, target)


def _on_time(device: str) -> Match:
    return lambda kind, target: kind == "on_time" and target.endswith("/" + device)


def _hide(kind_: str) -> Match:
    return lambda kind, target: kind == "hide" and target == kind_


@dataclass(frozen=True)
class Case:
    family: str
    backend: str
    variant: str
    counterpart: str
    expect: str
    """What the first finding should say, in words (for the table)."""
    match: Match | None
    """Names the cause; None: the first finding is checked against the counterpart's."""
    not_first: Match | None = None
    """A finding that must not come first (the overlapped collective)."""

    @property
    def id(self) -> str:
        return f"{self.family}-{self.backend}_{self.variant}"

    def trace(self, variant: str | None = None) -> Path:
        return ROOT / self.family / f"{self.backend}_{variant or self.variant}.xplane.pb.gz"

    def facts(self, variant: str | None = None) -> dict[str, Any]:
        path = ROOT / self.family / f"{self.backend}_{variant or self.variant}.facts.json"
        return json.loads(path.read_text())

    @property
    def projectable(self) -> bool:
        return self.match is not None


CASES: tuple[Case, ...] = (
    *(Case("host_pause", b, "pause", "nopause", "the device waits for the host", _host)
      for b in ("tpu", "cpu1")),
    *(Case("host_sync", b, "sync", "nosync", "a sync per step / the device waits for the "
           "host", _sync) for b in ("tpu", "cpu1")),
    Case("h2d", "tpu", "transfer", "resident", "an exposed host-to-device copy", _transfer),
    *(Case("eager", b, "eager", "jit", "dispatch / host-bound (jit it)", _dispatch)
      for b in ("tpu", "cpu1")),
    *(Case("scan", b, "scan", "unrolled", "the unrolled run's first finding, not idle", None)
      for b in ("tpu", "cpu1")),
    Case("straggler_extra", "cpu8", "extra", "balanced", "CPU3 late (on_time)",
         _on_time("CPU3")),
    Case("straggler_slow", "cpu8", "slow", "even", "CPU3 late (on_time)", _on_time("CPU3")),
    Case("collective", "cpu8", "exposed", "nocomm", "overlap the all-reduces (hide)",
         _hide("all-reduce")),
    Case("collective", "cpu8", "overlapped", "nocomm", "not 'overlap the all-reduces' (they "
         "already are)", _hide("all-reduce"), not_first=_hide("all-reduce")),
    Case("pipeline", "cpu8", "slowstage", "even", "CPU5 late (on_time)", _on_time("CPU5")),
    Case("alltoall", "cpu8", "imbalanced", "balanced", "CPU0 late (on_time)",
         _on_time("CPU0")),
)


@dataclass(frozen=True)
class Outcome:
    case: Case
    first: str
    """The first finding, ``kind/target: title`` (``-`` when none)."""
    first_ok: bool
    step: int | None
    step_ns: int | None
    projected_ns: int | None
    """The projected step with the cause removed; None: no what-if removes it."""
    projected_by: str
    measured_ns: int
    """The counterpart's measured step (median of its traced steps)."""
    measured_cause_ns: int

    @property
    def error(self) -> float | None:
        if self.projected_ns is None:
            return None
        return (self.projected_ns - self.measured_ns) / self.measured_ns

    @property
    def projection_ok(self) -> bool:
        return (self.projected_ns is not None
                and abs(self.projected_ns - self.measured_ns)
                <= max(TOLERANCE * self.measured_ns, TOLERANCE_NS))


@lru_cache(maxsize=None)
def summary(path: Path) -> dict[str, Any]:
    import tracelens

    return tracelens.summarize(tracelens.load(path))


def _first(s: dict[str, Any]) -> tuple[str, str, str]:
    items = s["findings"]["items"]
    if not items:
        return "-", "-", "nothing found"
    f = items[0]
    return f["kind"], f["target"], f["title"]


@lru_cache(maxsize=None)
def outcome(case: Case) -> Outcome:
    """Run tracelens on the case's trace and read (a) and (b) off it."""
    import tracelens

    s = summary(case.trace())
    kind, target, title = _first(s)
    if case.match is None:  # the loop: the same first finding as the unrolled program
        ck, ct, _ = _first(summary(case.trace(case.counterpart)))
        first_ok = (kind, target) == (ck, ct) and kind != "idle"
    elif case.not_first is not None:
        first_ok = not case.not_first(kind, target)
    else:
        first_ok = case.match(kind, target)
    fi = s["findings"]
    step, step_ns = fi.get("step"), fi.get("step_ns")
    projected, by = None, "no what-if removes it"
    if case.match is not None and step_ns:
        hit = next((f for f in fi["items"] if case.match(f["kind"], f["target"])
                    and f.get("saved_ns") is not None), None)
        if hit is not None:
            projected, by = step_ns - hit["saved_ns"], f"finding {hit['kind']} {hit['target']}"
        else:
            cp = tracelens.TraceAnalysis(tracelens.load(case.trace())).critical_path(
                step=step, top=1000, activities="none")
            w = next((w for w in cp.what_if if case.match(w.change, w.target)), None)
            if w is not None:
                projected, by = w.projected_step_ns, f"what-if {w.change} {w.target}"
    return Outcome(case, f"{kind}/{target}: {title}", first_ok, step, step_ns, projected, by,
                   round(case.facts(case.counterpart)["traced"]["median_ms"] * 1e6),
                   round(case.facts()["traced"]["median_ms"] * 1e6))


def _ms(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f}"


def table(outcomes: list[Outcome]) -> str:
    """The error table (Markdown): one row per case."""
    rows = ["| family | run | planted | first finding | (a) | projected ms | measured "
            "without ms | error | (b) |", "|---|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        c = o.case
        err = "-" if o.error is None else f"{o.error:+.1%}"
        b = "n/a" if not c.projectable else ("ok" if o.projection_ok else "FAIL")
        rows.append(f"| {c.family} | {c.backend}_{c.variant} (measured {_ms(o.measured_cause_ns)}"
                    f"; tool's step {o.step}: {_ms(o.step_ns)}) | {c.facts()['planted']} | "
                    f"{o.first} | {'ok' if o.first_ok else 'FAIL'} | {_ms(o.projected_ns)} "
                    f"({o.projected_by}) | {_ms(o.measured_ns)} ({c.backend}_{c.counterpart}) "
                    f"| {err} | {b} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table([outcome(c) for c in CASES]))
