"""MoE all-to-all balance: how unevenly the ranks of each expert-parallel
all-to-all (dispatch, combine; NCCL/RCCL, XLA ``all-to-all``/``ragged-all-to-all``, DeepEP
kernels named dispatch/combine) carry it.

An instance is the k-th execution of one op within one process group (XLA lists several
groups in one op: each is its own exchange). A rank's *time* in it runs from the last
participant's arrival to the rank's own end: the arrival skew is the straggler analysis's
business, what is left is the rank's share of the exchange (a rank receiving more tokens
ends later). That needs one clock: where the hosts were aligned on collective ends (no
wall clock: Kineto ranks), ends are equal by construction of the alignment, so the time
is the activity's duration instead (``Balance.time_basis`` says which).
Its *bytes* are its message size (PyTorch: the larger of its in/out split
totals; XLA: the op's static size, the same on every rank). Imbalance is max/mean over the
ranks, per instance and per step (each rank's time summed over the step's instances); the
slowest rank of an instance is its unique longest; ranks slowest in two or more instances
are listed, most often first.
"""

from __future__ import annotations

import polars as pl

from tracelens.results.axes import A2AInstance, Balance, SlowRank, StepBalance
from tracelens.results.collectives import Participant
from tracelens.core.text import matches

A2A_TYPES = ("all-to-all", "ragged-all-to-all")
A2A_NAMES = r"(?i)dispatch|combine|all_?to_?all|alltoall"


def _ratio(x: pl.Expr) -> pl.Expr:
    """max/mean of ``x``; null when any value is null or the mean is 0."""
    return pl.when(x.is_null().any() | (x.mean() == 0)).then(None).otherwise(
        x.max().cast(pl.Float64) / x.mean())


def balance(acts: pl.DataFrame, alignment: str) -> Balance | None:
    """The balance of the all-to-all activities of ``acts`` (``axes`` activities: with
    ``_group``, the own group text, and ``axis``), None when there are none.
    ``alignment``: how the job's hosts are aligned (``meta.alignment``)."""
    a2a = acts.filter(pl.col("type").is_in(A2A_TYPES)
                      | matches(acts, "op", A2A_NAMES).fill_null(False))
    if a2a.is_empty():
        return None
    inst = ["instance_key", "occurrence", "_group"]
    on_ends = alignment.startswith("collective ends")
    after_last = pl.col("end_ns") - pl.max_horizontal(
        "start_ns", pl.col("start_ns").max().over(inst))
    a2a = a2a.with_columns(_time=(pl.col("end_ns") - pl.col("start_ns")) if on_ends
                           else after_last.clip(lower_bound=0))
    top = pl.col("_time") == pl.col("_time").max()
    per = a2a.group_by(inst).agg(
        type=pl.col("type").first(), op=pl.col("op").first(), axis=pl.col("axis").first(),
        step=pl.col("step").min(), participants=pl.len(), start=pl.col("start_ns").min(),
        t=_ratio(pl.col("_time")), b=_ratio(pl.col("msg_bytes")),
        n_top=top.sum(), host=pl.col("host").filter(top).first(),
        rank=pl.col("rank").filter(top).first(), device=pl.col("device").filter(top).first(),
    ).sort("start", "instance_key", "_group", "occurrence", nulls_last=True)
    instances = tuple(A2AInstance(
        r["type"], r["op"], int(r["occurrence"]), r["_group"], r["axis"], r["step"],
        int(r["participants"]), int(r["start"]), r["t"], r["b"],
        Participant(r["host"], r["rank"], r["device"])
        if r["n_top"] == 1 and r["participants"] > 1 else None)
        for r in per.iter_rows(named=True))
    keys = ["host", "rank", "device"]
    steps = a2a.filter(pl.col("step").is_not_null()).group_by("step", *keys).agg(
        _t=pl.col("_time").sum(), _b=pl.col("msg_bytes").sum(),
        _bn=pl.col("msg_bytes").is_null().any(), _n=pl.len())
    step_rows = steps.group_by("step").agg(
        n=pl.col("_n").max(), t=_ratio(pl.col("_t")),
        b=pl.when(pl.col("_bn").any()).then(None).otherwise(_ratio(pl.col("_b"))),
    ).sort("step")
    per_step_instances = per.group_by("step").agg(pl.len())
    counts = dict(per_step_instances.iter_rows())
    step_out = tuple(StepBalance(int(r["step"]), int(counts.get(r["step"], 0)), r["t"], r["b"])
                     for r in step_rows.iter_rows(named=True))
    slow = per.filter((pl.col("n_top") == 1) & (pl.col("participants") > 1)).group_by(
        "host", "rank", "device").agg(times=pl.len())
    took = a2a.group_by(keys).agg(instances=pl.len())
    slowest = tuple(SlowRank(r["host"], r["rank"], r["device"], int(r["times"]),
                             int(r["instances"]))
                    for r in slow.join(took, on=keys).filter(pl.col("times") >= 2)
                    .sort(["times", "rank", "device", "host"],
                          descending=[True, False, False, False]).iter_rows(named=True))
    basis = ("duration (hosts aligned on collective ends: no shared clock)" if on_ends
             else "from the last arrival to the rank's end")
    return Balance(time_basis=basis, instances=instances, steps=step_out, slowest=slowest)
