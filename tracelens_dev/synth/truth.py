"""Ground truth of a synthetic job, computed from the construction (never from tracelens.analyze).

#timeline (README "What the numbers mean"); the method differs on
Definitions are those of docs/definitions.md
purpose: an elementary-segment sweep. All start/end times of one device (clipped to the window)
cut its time into segments; per segment and category a running count says which categories are
active. Then, summing segment lengths: busy = any active; compute = a compute category active;
comm = collective active; exposed comm = collective and no compute; memory = memory active;
exposed memory = memory and neither compute nor collective; exclusive time of a category = the
segments where it is the highest-priority active one. ``sum_ns`` adds (clipped) durations and
``count`` counts activities with a positive part in the window (all of them for the whole trace).

Collectives come from the construction's instances: per device and type, the count, the summed
kernel time, the exposed time (the part no compute kernel on the device covers), the true
transfer time, the wait (kernel time − transfer: the time the device sat in
the collective waiting for the last member), and the message bytes; per instance the bus
bandwidth msg_bytes / transfer × the nccl-tests factor.

Costs (:mod:`tracelens_dev.synth.costs`): every HLO op's FLOPs, bytes, message size and group size
from the shapes the construction chose, what each activity must carry, and MFU per device and
step.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tracelens.core.model import CATEGORIES
from tracelens_dev.synth.costs import (activity_costs_truth, bus_factor, mfu_truth, model_config,
                                   ops_truth)
from tracelens_dev.synth.devices import DeviceModel
from tracelens_dev.synth.program import Program
from tracelens_dev.synth.scenario import Scenario
from tracelens_dev.synth.schedule import Records

TRUTH_VERSION = 2
TIMELINE_KEYS = ("span_ns", "busy_ns", "compute_ns", "comm_ns", "exposed_comm_ns",
                 "overlapped_comm_ns", "memory_ns", "exposed_memory_ns", "idle_ns")
_N_COMPUTE = CATEGORIES.index("collective")
_COMM, _MEM = CATEGORIES.index("collective"), CATEGORIES.index("memory")


def sweep(start: np.ndarray, end: np.ndarray, prio: np.ndarray,
          window: tuple[int, int] | None = None) -> tuple[dict[str, int], list[dict]]:
    """Timeline and per-category numbers of one device over ``window`` (None: whole trace)."""
    if window is not None:
        lo, hi = window
        s, e = np.maximum(start, lo), np.minimum(end, hi)
        keep = e > s
        s, e, p = s[keep], e[keep], prio[keep]
        span = hi - lo
    else:
        s, e, p = start, end, prio
        span = int(e.max() - s.min()) if len(s) else 0
    bounds = np.unique(np.concatenate([s, e]))
    seg = np.diff(bounds)
    active = np.zeros((len(CATEGORIES), max(len(seg), 0)), dtype=bool)
    for c in range(len(CATEGORIES)):
        m = p == c
        if not m.any() or not len(seg):
            continue
        delta = (np.bincount(np.searchsorted(bounds, s[m]), minlength=len(bounds))
                 - np.bincount(np.searchsorted(bounds, e[m]), minlength=len(bounds)))
        active[c] = np.cumsum(delta)[:-1] > 0
    comp = active[:_N_COMPUTE].any(axis=0)
    comm, mem = active[_COMM], active[_MEM]
    anyc = comp | comm | mem

    def total(mask: np.ndarray) -> int:
        return int(seg[mask].sum())

    busy = total(anyc)
    tl = {"span_ns": int(span), "busy_ns": busy, "compute_ns": total(comp),
          "comm_ns": total(comm), "exposed_comm_ns": total(comm & ~comp),
          "memory_ns": total(mem), "exposed_memory_ns": total(mem & ~comp & ~comm),
          "idle_ns": int(span) - busy}
    tl["overlapped_comm_ns"] = tl["comm_ns"] - tl["exposed_comm_ns"]
    top = np.argmax(active, axis=0)  # first (highest-priority) active category
    cats = []
    for c, name in enumerate(CATEGORIES):
        m = p == c
        if not m.any():
            continue
        cats.append({"category": name, "count": int(m.sum()),
                     "sum_ns": int((e[m] - s[m]).sum()),
                     "exclusive_ns": total(anyc & (top == c))})
    return {k: tl[k] for k in TIMELINE_KEYS}, cats


def _compute_cover(s: np.ndarray, e: np.ndarray, p: np.ndarray):
    """A function t -> compute time on the device before t (merged compute intervals)."""
    m = p < _N_COMPUTE
    order = np.argsort(s[m], kind="stable")
    cs, ce = s[m][order], e[m][order]
    merged: list[list[int]] = []
    for a, b in zip(cs.tolist(), ce.tolist()):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    ms = np.array([a for a, _ in merged], dtype=np.int64)
    me = np.array([b for _, b in merged], dtype=np.int64)
    before = np.concatenate([[0], np.cumsum(me - ms)])

    def cover(t: int) -> int:
        k = int(np.searchsorted(ms, t, side="right"))  # segments starting at or before t
        if k == 0:
            return 0
        return int(before[k - 1] + min(t, me[k - 1]) - ms[k - 1])
    return cover


def compute_truth(sc: Scenario, model: DeviceModel, prog: Program, rec: Records,
                  hosts: list[str], offsets: dict[str, int]) -> dict[str, Any]:
    prio_of_spec = np.array([CATEGORIES.index(s.category) for s in prog.specs], np.int8)
    prio = prio_of_spec[rec.spec]
    order = np.argsort(rec.dev, kind="stable")
    cuts = np.searchsorted(rec.dev[order], np.arange(sc.hosts * sc.gpus + 1))
    coll_type = [s.collective for s in prog.specs]
    transfer_of_inst = rec.inst_transfer
    devices = []
    for d in range(sc.hosts * sc.gpus):
        idx = order[cuts[d]:cuts[d + 1]]
        s, e, p = rec.start[idx], rec.end[idx], prio[idx]
        h, g = divmod(d, sc.gpus)
        timeline, cats = sweep(s, e, p)
        steps = []
        for k in np.nonzero(rec.step_host == h)[0]:
            lo, hi = int(rec.step_start[k]), int(rec.step_end[k])
            stl, scats = sweep(s, e, p, (lo, hi))
            steps.append({"step": int(rec.step_num[k]), "start_ns": lo, "end_ns": hi,
                          "timeline": stl, "categories": scats})
        inst = rec.inst[idx]
        cover = _compute_cover(s, e, p)
        coll_rows: dict[str, dict[str, int]] = {}
        for i in np.nonzero(inst >= 0)[0]:
            spec = int(rec.spec[idx[i]])
            row = coll_rows.setdefault(coll_type[spec], {
                "count": 0, "sum_ns": 0, "exposed_ns": 0, "transfer_ns": 0, "wait_ns": 0,
                "msg_bytes": 0})
            dur = int(e[i] - s[i])
            transfer = int(transfer_of_inst[inst[i]])
            row["count"] += 1
            row["sum_ns"] += dur
            # the part of this kernel no compute kernel on the device covers
            row["exposed_ns"] += dur - (cover(int(e[i])) - cover(int(s[i])))
            row["transfer_ns"] += transfer
            row["wait_ns"] += dur - transfer
            row["msg_bytes"] += int(prog.specs[spec].msg_bytes or 0)
        _check_main_kernels(prog, rec, idx)
        mfu, step_mfu = mfu_truth(sc, model, prog, rec, idx)
        for st, sm in zip(steps, step_mfu):
            assert st["step"] == sm["step"]
            st.update(model_flops=sm["model_flops"], mfu=sm["mfu"])
        devices.append({
            "host": hosts[h], "rank": h, "device": g, "product": model.devices_row()["product"],
            "timeline": timeline, "categories": cats,
            "collectives": [{"type": t, **coll_rows[t]} for t in sorted(coll_rows)],
            **mfu, "steps": steps})
    return {
        "truth_version": TRUTH_VERSION,
        "generator": "tracelens_dev.synth",
        "scenario": _described(sc),
        "device_model": model.key,
        "host": hosts[0],
        "hosts": [{"host": hosts[h], "rank": h, "profile_start_ns": offsets[hosts[h]]}
                  for h in range(sc.hosts)],
        "model": model_config(sc, prog, prog.recipes()),
        "hlo": {"module": sc.module, "program_id": sc.program_id,
                "ops": len(prog.recipes()), "partitions": sc.hosts * sc.gpus},
        "ops": ops_truth(prog),
        "activity_costs": activity_costs_truth(prog),
        "devices": devices,
        "collective_instances": _instances(sc, prog, rec),
        "planted": _planted(sc, hosts),
    }


def _check_main_kernels(prog: Program, rec: Records, idx: np.ndarray) -> None:
    """The construction's promise behind the cost truth: on every device, an op's main kernel
    has the largest total time among the kernels of its op."""
    by_op: dict[str, dict[int, int]] = {}
    for spec, dur in zip(rec.spec[idx], rec.end[idx] - rec.start[idx]):
        op = prog.specs[spec].op
        if op is not None:
            d = by_op.setdefault(op, {})
            d[int(spec)] = d.get(int(spec), 0) + int(dur)
    for op, totals in by_op.items():
        if len(totals) > 1:
            main = [k for k in totals if prog.specs[k].main]
            assert len(main) == 1 and totals[main[0]] == max(totals.values()) and \
                list(totals.values()).count(totals[main[0]]) == 1, op


def _instances(sc: Scenario, prog: Program, rec: Records) -> list[dict[str, Any]]:
    """Every collective instance: who took part, when it ended, how long the transfer took and
    who arrived last (the members whose kernel is exactly ``transfer_ns`` long)."""
    sel = np.nonzero(rec.inst >= 0)[0]
    by_inst = sel[np.argsort(rec.inst[sel], kind="stable")]
    cut = np.searchsorted(rec.inst[by_inst], np.arange(len(rec.inst_spec) + 1))
    out = []
    for i in range(len(rec.inst_spec)):
        rows = by_inst[cut[i]:cut[i + 1]]
        spec = prog.specs[int(rec.inst_spec[i])]
        end, transfer = int(rec.inst_end[i]), int(rec.inst_transfer[i])
        last = rows[rec.start[rows] == end - transfer]
        out.append({
            "op": spec.op, "type": spec.collective, "step": int(rec.inst_step[i]),
            "group_size": len(rows), "msg_bytes": spec.msg_bytes, "transfer_ns": transfer,
            "busbw_gb_per_s": spec.msg_bytes / transfer * bus_factor(spec.collective, len(rows)),
            "end_ns": end,
            "last_arrivals": sorted([int(rec.dev[r]) // sc.gpus, int(rec.dev[r]) % sc.gpus]
                                    for r in last)})
    return out


def _planted(sc: Scenario, hosts: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"overlap": sc.overlap}
    if sc.straggler is not None:
        s = sc.straggler
        out["straggler"] = {"host": hosts[s.host], "rank": s.host, "device": s.device,
                            "slowdown": s.slowdown}
    return out


def _described(sc: Scenario) -> dict[str, Any]:
    """The scenario as the truth records it: a counterfactual knob only where it is set (the
    job is the same without it; the committed samples' truth predates it)."""
    out = dataclasses.asdict(sc)
    if not out["hidden_collectives"]:
        del out["hidden_collectives"]
    return out
