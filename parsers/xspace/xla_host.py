"""The host side of XLA programs (TPU and XLA:CPU files): what the runtime's host plane says
the host did for the device, read as host events the critical path understands.

Facts used (read off the real runs in ``sample_traces/real_runs``, JAX 0.10; names are the
runtime's own TraceMe names on ``/host:CPU``):

- a launch: ``DoEnqueueProgram`` (TPU) enqueues one run of a program on one chip; it carries
  the run's ``run_id`` and ``device_ordinal``, and the device plane's ``XLA Modules`` event
  of that run carries the same ``run_id``. The launch is linked to the run's first op by a
  correlation id made of both (:func:`run_correlation`), as CUPTI links a launch call to
  its kernel. On XLA:CPU the ops themselves carry ``run_id``; the program's dispatch to one
  device on the calling thread (``CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice``)
  is the latest one that began before the run's first op (one correlation id a run).
- a sync: the calling thread waits for a result (``np.asarray(jax.Array)``, a
  ``block_until_ready``, XLA:CPU's ``CommonPjRtBuffer::Await``), or the runtime learns that a
  run is done (``CompleteCallbacks``, TPU, with the run's ``run_id``): after it the host had
  the device's result.
- a host-to-device transfer's host side: ``DevicePut*``, ``Linearize``, ``H2D Dispatch``,
  ``tpu::System::TransferToDevice`` (the DMA itself is not on the device plane).
- a dispatch: ``PjitFunction(<fn>)``, one per call of a jitted function or eager op.

Everything else on the host plane (allocator, mutex and thread-pool events, the Python
tracer's frames, named ``$<file>:<line> <function>``, even ``$api.py:.. block_until_ready``)
is left unread: a host plane can hold millions of those.
"""

from __future__ import annotations

import re

import polars as pl

LAUNCH = "DoEnqueueProgram"
CPU_DISPATCH = r"^CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice$"
"""XLA:CPU's dispatch of a program to one device: it returns before the run's ops start. (The
multi-device ``Execute (<module>)`` is not read: it runs ops on the calling thread and
returns after the run's ops began, so its end is no launch; such runs stay unlinked.)"""
COMPLETION = "CompleteCallbacks"
SYNC = (r"^np\.asarray\(jax\.Array\)$|^CommonPjRtBuffer::Await$|^[^$].*block_until_ready|"
        r"^CompleteCallbacks$")
"""XLA host events after which the host has a device result (the critical path's syncs)."""
TRANSFER = (r"^DevicePut|^Linearize$|^H2D Dispatch$|^tpu::System::TransferToDevice$|"
            r"^BufferFromHostBuffer|BufferFromHostBuffer\(")
"""The host side of a host-to-device transfer."""
DISPATCH = r"^PjitFunction\("
HOST_WORK = re.compile("|".join([f"^{re.escape(LAUNCH)}$", CPU_DISPATCH, SYNC, TRANSFER,
                                 DISPATCH]))
"""Every host-plane event name read as XLA host work."""

RUN_ORDINALS = 1 << 12
"""Device ordinals per run in a correlation id (:func:`run_correlation`)."""
_RUN_LIMIT = (1 << 62) // RUN_ORDINALS


def run_correlation(run_id: pl.Expr, ordinal: pl.Expr) -> pl.Expr:
    """The correlation id linking a run's launch to its first op on one device: run_id x
    4096 + ordinal, negative so that it never meets a CUPTI/ROCm correlation id of the same
    host (those are positive); null where either is unknown or out of range."""
    ok = run_id.abs().lt(_RUN_LIMIT) & ordinal.is_between(0, RUN_ORDINALS - 1)
    return pl.when(ok).then(-(run_id * RUN_ORDINALS + ordinal) - 1).otherwise(None) \
        .cast(pl.Int64)


def host_work(df: pl.DataFrame) -> pl.DataFrame:
    """The XLA host work among one host-plane line's events (``name``, times, ``run_id``,
    ``device_ordinal``, ...): launches get their run's correlation id, the rest none."""
    work = df.filter(pl.col("name").cast(pl.String).str.contains(HOST_WORK.pattern))
    if work.is_empty():
        return work
    launch = pl.col("name").cast(pl.String) == LAUNCH
    return work.with_columns(correlation_id=pl.when(launch).then(
        run_correlation(pl.col("run_id"), pl.col("device_ordinal"))).otherwise(None))


def first_ops(ops: pl.DataFrame, runs: pl.DataFrame, ordinal: int) -> pl.DataFrame:
    """``ops`` (one device's ``XLA Ops`` activities) with ``correlation_id`` on each run's
    first op: the first to start at or after the ``XLA Modules`` run's start, before its end
    (``runs``: start_ns, end_ns, run_id)."""
    if ops.is_empty() or runs.is_empty():
        return ops.with_columns(correlation_id=pl.lit(None, pl.Int64))
    r = runs.filter(pl.col("run_id").is_not_null()).select(
        _s=pl.col("start_ns"), _e=pl.col("end_ns"),
        _c=run_correlation(pl.col("run_id"), pl.lit(ordinal, pl.Int64))).sort("_s")
    o = ops.with_row_index("_row").sort("start_ns")
    first = o.select("_row", "start_ns").join_asof(
        r, left_on="start_ns", right_on="_s", strategy="backward", check_sortedness=False
    ).filter(pl.col("start_ns") < pl.col("_e")).sort("start_ns").group_by(
        "_s", maintain_order=True).agg(pl.col("_row").first(), pl.col("_c").first())
    return ops.with_row_index("_row").join(first.select("_row", correlation_id="_c"),
                                           on="_row", how="left", maintain_order="left") \
        .drop("_row")


def cpu_launches(ops: pl.DataFrame, work: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """XLA:CPU: (``ops`` with ``correlation_id`` on each run's first op on each device,
    ``work`` with it on the execution that started the run: the latest that began before the
    run's first op; one a run, the devices' first ops share it)."""
    if ops.is_empty() or "run_id" not in ops.columns or work.is_empty():
        return ops, work
    firsts = ops.with_row_index("_row").filter(pl.col("run_id").is_not_null()).sort(
        "start_ns").group_by("run_id", "device_ordinal", maintain_order=True).agg(
        pl.col("_row").first(), pl.col("start_ns").first())
    runs = firsts.group_by("run_id").agg(_s=pl.col("start_ns").min()).with_columns(
        _c=run_correlation(pl.col("run_id"), pl.lit(0, pl.Int64)))
    disp = work.with_row_index("_w").filter(
        pl.col("name").cast(pl.String).str.contains(CPU_DISPATCH)).select("_w", _t="start_ns") \
        .sort("_t")
    got = runs.sort("_s").join_asof(disp, left_on="_s", right_on="_t", strategy="backward",
                                    check_sortedness=False)
    got = got.filter(pl.col("_w").is_not_null()).sort("_t", "_s").unique(
        "_w", keep="first", maintain_order=True)  # one execution starts one run
    linked = firsts.join(got.select("run_id", "_c"), on="run_id")
    ops = ops.with_row_index("_row").join(linked.select("_row", "_c"), on="_row", how="left",
                                          maintain_order="left").with_columns(
        correlation_id=pl.coalesce("_c", "correlation_id")).drop("_row", "_c")
    work = work.with_row_index("_w").join(got.select("_w", "_c"), on="_w", how="left",
                                          maintain_order="left").with_columns(
        correlation_id=pl.coalesce("_c", "correlation_id")).drop("_w", "_c")
    return ops, work


def device_lag_ns(events: pl.DataFrame, launches: pl.DataFrame) -> int:
    """How far one device's clock is behind the host's, at least: a run cannot start before
    the host begins to enqueue it, so the most its first op started before its launch call
    began (0 where none did). ``events``: the device's activities with ``correlation_id``;
    ``launches``: the launch calls (``correlation_id``, ``start_ns``)."""
    if events.is_empty() or launches.is_empty():
        return 0
    got = events.filter(pl.col("correlation_id").is_not_null()).select(
        "correlation_id", k="start_ns").join(
        launches.select("correlation_id", l="start_ns"), on="correlation_id")
    if got.is_empty():
        return 0
    early = got.select((pl.col("l") - pl.col("k")).max()).item()
    return int(early) if early is not None and early > 0 else 0
