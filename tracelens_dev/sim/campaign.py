"""The campaign (issue 45 item 3): a simulated step written in a format, tracelens's critical
path run on the file, and three checks against the simulator's truth (docs/simulator.md).

(a) ``path``: the longest path's composition equals the simulator's own per component
    within max(1% of the step, 10 us); (b) ``what_if``: every what-if the analyzer lists
    that the simulator can re-simulate predicts the counterfactual step within
    max(2% of the step, 20 us); (c) ``best``: the analyzer's largest projected saving is
    the change that truly saves most among those both sides evaluate (its true saving
    within the what-if tolerance of the best one's).

The analyzer is run as the ``critical-path`` command runs it (:func:`tracelens.engine.hosts.run`
on ``CriticalPath``), in this process, and read through its JSON result.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tracelens_dev.sim.changes import Change, counterfactual
from tracelens_dev.sim.engine import Sim, simulate
from tracelens_dev.sim.model import Job
from tracelens_dev.sim.path import critical_path
from tracelens_dev.sim.trace import limits, write

PATH_TOL = (0.01, 10_000)
WHAT_IF_TOL = (0.02, 20_000)
CAMPAIGN_FORMATS = ("xspace", "xspace-device")
_STEP_MARKER = {"rocpd": r"step \d+", "rpd": r"step \d+", "rocprof-json": r"step \d+",
                "rocprof-csv": r"step \d+"}


def tolerance(step_ns: int, tol: tuple[float, int]) -> int:
    return max(int(step_ns * tol[0]), tol[1])


@dataclass
class Check:
    """One check's outcome: ``ok`` None when there was nothing to check (``why`` says)."""

    name: str
    ok: bool | None
    error_ns: int = 0  # the largest error (ns) the check saw
    tolerance_ns: int = 0
    detail: dict[str, Any] = field(default_factory=dict)
    why: str = ""


@dataclass
class Result:
    seed: int | None
    regime: str
    fmt: str
    step_ns: int
    checks: dict[str, Check]
    truth: dict[str, int]
    analyzer: dict[str, Any]
    limits: list[str]

    @property
    def ok(self) -> bool:
        return all(c.ok is not False for c in self.checks.values())


def run_analyzer(path: Path, fmt: str) -> dict[str, Any]:
    """tracelens's critical path of the file, as ``critical-path --format json`` gives it."""
    from tracelens.analyze.critical.path import CriticalPath, CriticalPathOptions
    from tracelens.engine.hosts import EngineOptions, LoadOptions, run
    from tracelens.results.encode import json_bytes

    res = run(CriticalPath(), [path], CriticalPathOptions(top=1000, activities="none"),
              LoadOptions(step_marker=_STEP_MARKER.get(fmt)), EngineOptions(workers=1))
    out: dict[str, Any] = orjson.loads(json_bytes(res))
    return out


def device_rank(job: Job, label: str) -> int | None:
    """The simulator rank of a device as the analyzer names it: ``<host>/GPU<d>`` where the
    host is ``sim-node<h>`` (XSpace, rocprof), ``rank<h>`` (Kineto) or unnamed (RPD: one
    host)."""
    m = re.fullmatch(r"(.*)/GPU(\d+)", label)
    if not m:
        return None
    h = re.search(r"(\d+)$", m.group(1))
    host = int(h.group(1)) if h and m.group(1).startswith(("sim-node", "rank")) else 0
    r = host * job.gpus_per_host + int(m.group(2))
    return r if r < job.ranks else None


def _norm_component(job: Job, name: str) -> str:
    if name.startswith("wait:"):
        r = device_rank(job, name[5:])
        return f"wait:{job.device_label(r)}" if r is not None else name
    return name


def change_of(job: Job, row: dict[str, Any]) -> Change | None:
    """The simulator's change for one of the analyzer's what-if rows (None: not one the
    simulator models)."""
    kind, target = row.get("change"), row.get("target")
    if kind == "hide" and target == "memory":
        return None  # copies run in no time: no change of the simulator's
    if kind == "hide":
        return Change("hide", str(target))
    if kind == "on_time":
        r = device_rank(job, str(target))
        return None if r is None else Change("on_time", r)
    if kind == "roofline":
        return Change("roofline", str(target))
    if kind == "graph_launch":
        return Change("graph_launch")
    return None


def check(job: Job, fmt: str, sim: Sim | None = None, out_dir: Path | None = None,
          analyzer: dict[str, Any] | None = None) -> Result:
    """Write ``job``'s simulated step in ``fmt``, analyze it and run the three checks."""
    sim = sim or simulate(job)
    T = sim.step_ns
    truth = critical_path(sim).composition
    if analyzer is None:
        with tempfile.TemporaryDirectory(prefix="tl-sim-") as tmp:
            base = Path(out_dir) if out_dir is not None else Path(tmp)
            (path,) = write(sim, fmt, base / fmt)[:1]
            try:
                analyzer = run_analyzer(path, fmt)
            except Exception as e:  # the analyzer failing is a finding, not a crash
                analyzer = {"paths": [], "what_if": [], "notes": [],
                            "error": f"{type(e).__name__}: {e}"}
    own = critical_path(sim, after_wait="own").composition
    if fmt not in HOST_TIMELINE:
        truth, own = _unseen_host(truth), _unseen_host(own)
    checks = {"path": _check_path(job, T, truth, analyzer, own),
              **_check_what_ifs(job, T, analyzer)}
    return Result(job.meta.get("seed"), str(job.meta.get("regime", "")), fmt, T, checks,
                  truth, analyzer, limits(fmt))


HOST_TIMELINE = ("xspace", "kineto")
"""The formats the simulator writes with its host threads' calls (the others: device only, or
RCCL API rows that are not the simulated host timeline)."""

HOST_SIDE = ("host", "launch_latency", "sync")


def _unseen_host(comp: dict[str, int]) -> dict[str, int]:
    """The simulator's path as a trace without the host's timeline can tell it: the time the
    step waited for the host (its work, launch latency, syncs) is device time with nothing
    known to bind it, ``idle``."""
    out = {k: v for k, v in comp.items() if k not in HOST_SIDE}
    unseen = sum(v for k, v in comp.items() if k in HOST_SIDE)
    if unseen:
        out["idle"] = out.get("idle", 0) + unseen
    return out


def _errors(comp: dict[str, int], truth: dict[str, int]) -> dict[str, int]:
    return {k: comp.get(k, 0) - truth.get(k, 0) for k in sorted(set(comp) | set(truth))}


def _check_path(job: Job, T: int, truth: dict[str, int], an: dict[str, Any],
                own: dict[str, int] | None = None) -> Check:
    """``own``: the simulator's path read per device (after a wait, the walk's own device's
    history): its error is reported beside, not checked."""
    tol = tolerance(T, PATH_TOL)
    paths = an.get("paths") or []
    if not paths:
        return Check("path", False, T, tol, why=an.get("error") or "the analyzer gave no path")
    # the step's path as summarize picks it (tracelens.analyze.critical.walk.step_path_key)
    longest = max(paths, key=lambda p: (int(p.get("length_ns") or 0),
                                        -int(p.get("idle_after_ns") or 0),
                                        -int(p.get("rank") or 0), -int(p.get("device") or 0)))
    comp: dict[str, int] = {}
    for c in longest.get("composition") or []:
        k = _norm_component(job, str(c["component"]))
        comp[k] = comp.get(k, 0) + int(round(float(c["ns"])))
    errors = _errors(comp, truth)
    worst = max((abs(v) for v in errors.values()), default=0)
    own_worst = max((abs(v) for v in _errors(comp, own or truth).values()), default=0)
    length = int(longest.get("length_ns") or 0)
    worst = max(worst, abs(length - T))
    return Check("path", worst <= tol, worst, tol, detail={
        "device": f"{longest.get('host')}/GPU{longest.get('device')}", "length_ns": length,
        "analyzer": comp, "simulator": truth,
        "errors": {k: v for k, v in errors.items() if v},
        "error_ns_vs_own_reading": max(own_worst, abs(length - T))})


def _check_what_ifs(job: Job, T: int, an: dict[str, Any]) -> dict[str, Check]:
    tol = tolerance(T, WHAT_IF_TOL)
    rows = []
    unmodelled = []
    for row in an.get("what_if") or []:
        ch = change_of(job, row)
        if ch is None:
            unmodelled.append(f"{row.get('change')} {row.get('target')}")
            continue
        true_step = counterfactual(job, ch)
        proj = int(row.get("projected_step_ns") or 0)
        rows.append({"change": f"{row.get('change')} {row.get('target')}",
                     "projected_step_ns": proj, "true_step_ns": true_step,
                     "error_ns": proj - true_step, "saved_ns": int(row.get("saved_ns") or 0),
                     "true_saved_ns": T - true_step})
    if not rows:
        why = "the analyzer lists no what-if the simulator models"
        return {"what_if": Check("what_if", None, 0, tol, {"unmodelled": unmodelled}, why),
                "best": Check("best", None, 0, tol, why=why)}
    worst = max(abs(r["error_ns"]) for r in rows)
    what_if = Check("what_if", worst <= tol, worst, tol,
                    {"rows": rows, "unmodelled": unmodelled,
                     "failing": [r["change"] for r in rows if abs(r["error_ns"]) > tol]})
    pick = max(rows, key=lambda r: r["saved_ns"])
    best = max(rows, key=lambda r: r["true_saved_ns"])
    gap = best["true_saved_ns"] - pick["true_saved_ns"]
    return {"what_if": what_if,
            "best": Check("best", gap <= tol, gap, tol,
                          {"analyzer_pick": pick["change"], "true_best": best["change"],
                           "pick_true_saved_ns": pick["true_saved_ns"],
                           "best_true_saved_ns": best["true_saved_ns"]})}
