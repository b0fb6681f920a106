"""One host's piece of the critical-path dependency graph of a window.

The graph's nodes are the activities of the window (a step, an annotation's k-th
occurrence, or the whole trace), per rank:

- device activities (kernels, copies, sets) in stream order: a *chain* per (device, stream);
- host events in thread order: the *leaf* API calls and CPU ops of each thread (an event
  that contains another on its thread is not a node: its children are), a chain per thread.

A node's start waits (the *S side*) for the previous node of its chain and for its external
predecessors: a device activity for its launch call (same host, rank and correlation id;
from the call's start when the call itself blocks, like a synchronous copy), and, when a
stream-wait call (``cudaStreamWaitEvent``/``hipStreamWaitEvent``) was issued between the
launches of the stream's previous activity and this one, for the latest activity of another
stream of its device that ended before it started. A node's own work may also wait inside
it (the *B side*): a synchronizing call waits for the latest activity of each device of its
rank that ended before the call returned; a collective waits for its instance's last
arrival (added across ranks in :mod:`tracelens.analyze.critical.solve`, from ``instance``
and ``occurrence``, so that hosts are linked only in the reduce).

Everything here is one host's frames, columnar; node ids are row numbers within the host's
node frame (the merge offsets them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from tracelens.analyze.timeline.blocked import blocked
from tracelens.analyze.timeline.idle import SYNC_CALL
from tracelens.core.errors import TraceInputError
from tracelens.core.frames import distinct
from tracelens.core.instances import with_instance_keys
from tracelens.core.model import Text, Trace, on_async_lane
from tracelens.loading.step_choice import headline_step
from tracelens.core.text import matches

XLA_SYNC = (r"^np\.asarray\(jax\.Array\)$|^CommonPjRtBuffer::Await$|^[^$].*block_until_ready|"
            r"^CompleteCallbacks$")
"""XLA host events after which the host has a device result: a thread's wait for an array
(TPU ``np.asarray(jax.Array)``, XLA:CPU ``CommonPjRtBuffer::Await``), or the TPU runtime
learning that a program run is done (``CompleteCallbacks``); the XSpace reader's
(``parsers/xspace/xla_host.py``)."""

XLA_DISPATCH = (r"^PjitFunction\(|^DoEnqueueProgram$|"
                r"^CommonPjRtLoadedExecutable::ExecuteHelperOnSingleDevice$")
"""XLA's dispatch of a program run (the XSpace reader's): a jitted call or eager op, its
launch on a TPU, its execution on XLA:CPU."""

XLA_TRANSFER = (r"^DevicePut|^Linearize$|^H2D Dispatch$|^tpu::System::TransferToDevice$|"
                r"BufferFromHostBuffer")
"""The host side of an XLA host-to-device transfer (the XSpace reader's): its calls, after
which the thread waits for the copy before it goes on (a program that reads the copy is
enqueued once it is done)."""

SYNC = SYNC_CALL + r"|(?i)^(hip|cuda)MemcpyPeer$|" + XLA_SYNC
"""Host calls that block until the device catches up: the idle breakdown's, the peer
copies (which the idle breakdown does not count as a sync wait), and XLA's syncs."""

STREAM_WAIT = r"(?i)^(hip|cuda|cu)StreamWaitEvent(_v2|_ptsz)?$"
"""The host call that makes a stream wait for an event recorded on another stream."""

HOST_KINDS = ("api", "cpu_op")
"""Host events that are graph nodes (leaf calls and ops); annotations and steps are not."""

NODE_SCHEMA: dict[str, pl.DataType] = {
    "host": Text, "rank": pl.Int32, "device": pl.Int32, "stream": pl.Int64,
    "pid": pl.Int64, "tid": pl.Int64, "kind": Text, "name": Text,
    "category": Text, "subcategory": Text, "start_ns": pl.Int64,
    "end_ns": pl.Int64, "correlation_id": pl.Int64, "instance": Text,
    "occurrence": pl.Int64, "sync": pl.Boolean, "device_node": pl.Boolean,
    "attain_ns": pl.Float64,
}
"""One row per node. ``device``/``stream`` null for host nodes, ``pid``/``tid`` null for
device nodes; ``instance``/``occurrence``: a collective's instance key and k (null
otherwise); ``sync``: a host call that blocks until the device catches up; ``attain_ns``:
a compute kernel's roofline-attainable time (null: its FLOPs, bytes or the GPU's peaks are
unknown). Text columns are dictionary-encoded (:data:`tracelens.core.model.Text`): a job's merged
nodes hold each kind, category and instance key once, not once a row (128 hosts' 1M nodes:
-51 MB)."""

EDGE_SCHEMA: dict[str, pl.DataType] = {
    "src": pl.Int64, "dst": pl.Int64, "side": pl.String, "point": pl.String,
    "kind": pl.String,
}
"""External (cross-chain) edges: ``side`` S (gates the node's start) or B (gates its own
work); ``point`` E (the source's end) or S (its start); ``kind`` launch, sync or event."""

WINDOW_SCHEMA: dict[str, pl.DataType] = {
    "host": Text, "rank": pl.Int32, "step": pl.Int32, "start_ns": pl.Int64,
    "end_ns": pl.Int64,
}


@dataclass(frozen=True)
class WindowChoice:
    """Which window: ``step`` (None: the headline's step,
    :func:`tracelens.loading.step_choice.headline_step`, of the steps the trace holds; the whole
    trace without steps), or ``window`` (a regex on host
    annotation names, ``#k`` picks the k-th match from 0; it wins over ``step``), or
    ``time`` (the same stretch of time on every rank; it wins over both): ``(START, END)``
    ns from the trace's zero (its first activity or step, as ``--time`` everywhere), either
    side None for the trace's first activity start or last activity end."""

    step: int | None = None
    window: str | None = None
    time: tuple[int | None, int | None] | None = None


def windows(trace: Trace, choice: WindowChoice) -> pl.DataFrame:
    """The window of each (host, rank) with device activity (WINDOW_SCHEMA)."""
    ranks = distinct(trace.events, ["host", "rank"])
    if choice.time is not None:
        lo, hi = _time_bounds(trace, choice.time)
        out = ranks.with_columns(step=pl.lit(None, pl.Int32), start_ns=pl.lit(lo, pl.Int64),
                                 end_ns=pl.lit(hi, pl.Int64))
    elif choice.window is not None:
        pattern, k = window_pattern(choice.window)
        he = trace.host_events
        hev = he.filter(matches(he, "name", pattern) & ~pl.col("kind").is_in(list(HOST_KINDS[:1])))
        w = hev.sort("host", "rank", "start_ns", "end_ns").with_columns(
            _k=pl.int_range(pl.len()).over("host", "rank")).filter(pl.col("_k") == k)
        out = w.select("host", "rank", step=pl.lit(None, pl.Int32), start_ns="start_ns",
                       end_ns="end_ns")
    elif trace.steps.height:
        steps = trace.steps
        if choice.step is None:  # the headline's step (the median by span, one that ran)
            step = headline_step(steps)
        else:
            step = choice.step
            if step not in set(steps["step"].to_list()):
                raise TraceInputError(_source(trace), f"no step {step} in the trace (steps: "
                                      f"{_few(sorted(set(steps['step'].to_list())))})")
        out = steps.filter(pl.col("step") == step).join(ranks, on="rank").select(
            "host", "rank", "step", "start_ns", "end_ns")
    else:
        out = trace.events.group_by("host", "rank").agg(
            step=pl.lit(None, pl.Int32), start_ns=pl.col("start_ns").min(),
            end_ns=pl.col("end_ns").max())
    return out.select(list(WINDOW_SCHEMA)).cast(WINDOW_SCHEMA).sort("rank", "host")  # type: ignore


def _time_bounds(trace: Trace, time: tuple[int | None, int | None]) -> tuple[int, int]:
    """``--time`` on the trace's clock: from its zero, open sides at its activities' ends;
    a stretch with no activity in it is an input error."""
    from tracelens.loading.filters import trace_zero

    if trace.events.is_empty():
        raise TraceInputError(_source(trace), "no device activity: no --time window")
    zero = trace_zero(trace)
    first, last = trace.events["start_ns"].min(), trace.events["end_ns"].max()
    lo = zero + time[0] if time[0] is not None else int(first)  # type: ignore[arg-type]
    hi = zero + time[1] if time[1] is not None else int(last)  # type: ignore[arg-type]
    if trace.events.filter((pl.col("start_ns") < hi) & (pl.col("end_ns") > lo)).is_empty():
        raise TraceInputError(_source(trace), f"no device activity in --time "
                              f"{_span(time)} (the trace's activities span "
                              f"{(int(first) - zero) / 1e6:g}:{(int(last) - zero) / 1e6:g} ms)")
    return lo, hi


def _span(time: tuple[int | None, int | None]) -> str:
    def side(v: int | None) -> str:
        return "" if v is None else f"{v / 1e6:g}ms"
    return f"{side(time[0])}:{side(time[1])}"


def window_pattern(text: str) -> tuple[str, int]:
    """``REGEX[#k]`` -> (regex, k); a bad regex is an input error, not a traceback."""
    m = re.fullmatch(r"(.*?)(?:#(\d+))?", text)
    pattern, k = (m.group(1), int(m.group(2) or 0)) if m else (text, 0)
    try:
        re.compile(pattern)
    except re.error as exc:
        raise TraceInputError("--window",
                              f"not a regular expression: {pattern!r} ({exc})") from None
    return pattern, k


def _source(trace: Trace) -> str:
    return trace.meta.sources[0]["path"] if trace.meta.sources else "trace"


def _few(xs: list[int]) -> str:
    return ", ".join(map(str, xs[:8])) + (" ..." if len(xs) > 8 else "")


def _overlapping(df: pl.DataFrame, win: pl.DataFrame) -> pl.DataFrame:
    """Rows of ``df`` overlapping their (host, rank)'s window. The rows outside every
    window's span (the first start to the last end) are dropped first, without a join: a
    step's window holds a few thousand of a trace's millions of rows."""
    w = win.select("host", "rank", _w0="start_ns", _w1="end_ns")

    def overlaps(w0: pl.Expr, w1: pl.Expr) -> pl.Expr:
        return (pl.col("start_ns") < w1) & (pl.col("end_ns") > w0) \
            | (pl.col("start_ns") == pl.col("end_ns")) & pl.col("start_ns").is_between(w0, w1)

    if w.is_empty():
        return df.clear()
    span = overlaps(pl.lit(w["_w0"].min(), pl.Int64), pl.lit(w["_w1"].max(), pl.Int64))
    return df.filter(span).join(w, on=["host", "rank"], maintain_order="left").filter(
        overlaps(pl.col("_w0"), pl.col("_w1"))).drop("_w0", "_w1")


_DEVICE_COLUMNS = ["host", "rank", "device", "stream", "kind", "name", "category", "subcategory",
                   "op", "module", "start_ns", "end_ns", "correlation_id", "flops", "bytes",
                   "dtype"]
"""What a device node and its instance key and roofline time are made of: the event frame
narrowed to these before the window's join (2M rows wide cost ~0.4 GB and a second)."""


def device_nodes(trace: Trace, win: pl.DataFrame) -> pl.DataFrame:
    """The window's device activities as nodes, with their collective instance keys
    (counted over the whole trace, so the k-th execution matches across hosts). Transfers in
    flight on async lanes (:data:`~tracelens.core.model.ASYNC_LANE_STREAM`) are no nodes: the
    core waits for them at their done op, which is one; their lanes are no stream order."""
    ev = trace.events
    if "hlo_category" in ev.columns:  # (only TPU ops carry XLA's category, and lanes)
        ev = ev.filter(~on_async_lane())
    ev = ev.select(_DEVICE_COLUMNS).with_row_index("_row")
    keyed = with_instance_keys(ev.select(  # what the keys are made of, not every column
        "_row", "host", "rank", "device", "start_ns", "category", "subcategory", "op",
        "module")).select("_row", "instance_key", "occurrence")
    ev = _overlapping(ev, win).join(keyed, on="_row", how="left",
                                    maintain_order="left").drop("_row")
    ev = ev.with_columns(attain_ns=attainable_ns(ev, trace.devices))
    return ev.select(
        "host", "rank", "device", "stream", pid=pl.lit(None, pl.Int64),
        tid=pl.lit(None, pl.Int64), kind=pl.col("kind").cast(pl.String), name="name",
        category=pl.col("category").cast(pl.String), subcategory="subcategory",
        start_ns="start_ns", end_ns="end_ns", correlation_id="correlation_id",
        instance="instance_key", occurrence="occurrence", sync=pl.lit(False),
        device_node=pl.lit(True), attain_ns="attain_ns").cast(NODE_SCHEMA)  # type: ignore


def attainable_ns(ev: pl.DataFrame, devices: pl.DataFrame) -> pl.Series:
    """Per activity, the time it would take at its roofline (docs/definitions.md#cost-model):
    max(flops / peak(dtype), bytes / HBM bandwidth), for compute kernels whose FLOPs, bytes
    and GPU peaks are known; null otherwise."""
    from tracelens.analyze.compute.roofline import _peak_of_dtype, device_specs, spec_frame

    specs = spec_frame(device_specs(devices))
    keys = ["host", "rank", "device"]
    got = ev.select(*keys, "kind", "category", "flops", "bytes", "dtype").with_row_index(
        "_i").join(specs, on=keys, how="left", maintain_order="left")
    ok = ((pl.col("kind") == "kernel") & (pl.col("category") != "collective")
          & pl.col("flops").is_not_null() & pl.col("bytes").is_not_null()
          & (_peak_of_dtype() > 0) & (pl.col("hbm_tb_per_s") > 0))
    t = pl.max_horizontal(pl.col("flops") / _peak_of_dtype(),
                          pl.col("bytes") / pl.col("hbm_tb_per_s")) / 1e3  # TFLOP/s -> ns
    return got.select(pl.when(ok).then(t).alias("attain_ns"))["attain_ns"]


def _near(he: pl.DataFrame, win: pl.DataFrame, keep: pl.Expr) -> pl.DataFrame:
    """The host events (of ``he``, those ``keep`` selects) whose leafness a window's nodes
    need: those starting between the first start and the last end of the events overlapping
    the windows' span. An event X overlapping the span is a leaf when the next event of its
    thread (by start) starts at or after X's end; that next event starts at or after X's
    start, so either it is kept here, or it and every kept event after X start at or after
    X's end (X is a leaf either way). A step's window then sorts a few thousand of a trace's
    millions of host events, and only those are copied (one filter, not two)."""
    if win.is_empty() or he.is_empty():
        return he.filter(keep)
    w0, w1 = win["start_ns"].min(), win["end_ns"].max()
    over = (pl.col("start_ns") < w1) & (pl.col("end_ns") > w0) \
        | (pl.col("start_ns") == pl.col("end_ns")) & pl.col("start_ns").is_between(w0, w1)
    lo, hi = he.lazy().filter(keep & over).select(pl.col("start_ns").min(),
                                                  pl.col("end_ns").max()).collect().row(0)
    if lo is None:
        return he.clear()
    return he.lazy().filter(keep & pl.col("start_ns").is_between(lo, hi)).collect()


def host_nodes(trace: Trace, win: pl.DataFrame,
               devices: pl.DataFrame | None = None) -> pl.DataFrame:
    """The leaf host calls and ops of each thread overlapping the window, and the launch
    calls (before it) of the window's ``devices`` nodes: whether the host ran ahead or fell
    behind is read from them (:func:`local_edges`)."""
    he = _near(trace.host_events, win, pl.col("kind").is_in(list(HOST_KINDS))) \
        .with_columns(pid=pl.col("pid").fill_null(-1), tid=pl.col("tid").fill_null(-1))
    thread = ["host", "rank", "pid", "tid"]
    he = he.sort(*thread, "start_ns", pl.col("end_ns"), descending=[False] * 5 + [True])
    nxt = pl.col("start_ns").shift(-1).over(thread)
    # a leaf: the next event of its thread (by start) starts at or after its end
    he = he.filter(nxt.is_null() | (nxt >= pl.col("end_ns")))
    he = _overlapping(he, win)
    if devices is not None and devices.height:
        key = ["host", "rank", "correlation_id"]
        launched = devices.select(key).filter(pl.col("correlation_id").is_not_null()).unique()
        early = trace.host_events.lazy().filter(
            (pl.col("kind") == "api") & pl.col("correlation_id").is_not_null()
            & (pl.col("end_ns") <= win["start_ns"].max())).join(
            launched.lazy(), on=key, how="semi").with_columns(
            pid=pl.col("pid").fill_null(-1), tid=pl.col("tid").fill_null(-1)).collect()
        ident = [*thread, "start_ns", "end_ns", "correlation_id"]
        early = early.select(he.columns).join(he.select(ident), on=ident, how="anti")
        he = pl.concat([he, early.cast(he.schema)])  # type: ignore[arg-type]
    return he.select(
        "host", "rank", device=pl.lit(None, pl.Int32), stream=pl.lit(None, pl.Int64),
        pid="pid", tid="tid", kind="kind", name="name", category=pl.lit(None, pl.String),
        subcategory=pl.lit(None, pl.String), start_ns="start_ns", end_ns="end_ns",
        correlation_id="correlation_id", instance=pl.lit(None, pl.String),
        occurrence=pl.lit(None, pl.Int64), sync=matches(he, "name", SYNC),
        device_node=pl.lit(False), attain_ns=pl.lit(None, pl.Float64)).cast(
        NODE_SCHEMA)  # type: ignore[arg-type]


def chain_order(nodes: pl.DataFrame) -> pl.DataFrame:
    """Nodes sorted into their chains (device stream or host thread), in time order, with
    ``chain`` (its number) and ``id`` (the row number, as edges refer to it)."""
    key = pl.when(pl.col("device_node")).then(pl.concat_str(
        pl.lit("d"), pl.col("host"), pl.col("rank"), pl.col("device"), pl.col("stream"),
        separator="\x1f")).otherwise(pl.concat_str(
            pl.lit("h"), pl.col("host"), pl.col("rank"), pl.col("pid"), pl.col("tid"),
            separator="\x1f"))
    out = nodes.with_columns(_key=key).sort("_key", "start_ns", "end_ns", "name",
                                            maintain_order=True)
    return out.with_columns(chain=pl.col("_key").rank("dense").cast(pl.Int64) - 1,
                            id=pl.int_range(pl.len(), dtype=pl.Int64)).drop("_key")


def local_edges(nodes: pl.DataFrame) -> pl.DataFrame:
    """Launch, sync, event-wait, stream-order and host-delay edges among one host's nodes
    (``chain_order``ed).

    Which edges exist follows the binding rule (docs/critical-path.md#the-binding-rule):

    - a device activity's recorded event waits, or, on a rank whose trace records no
      stream-wait call, *order* edges from the latest activity of each other stream of its
      device that ended before it started and after its own stream was free (the step's
      order across streams: a collective waits for the compute that made its data, a kernel
      for the all-gather it reads and the copy of its input);
    - its launch only where the launch came after everything else it waited for (the host
      was behind: the stream was free when the kernel was issued); a launch that came
      earlier bound nothing, and is left out so that a what-if may move the activity
      before it (the host ran ahead of the device, or was held back by it);
    - on a thread held back by the device (:func:`_held_back`), each launch call waits for
      what its activity waited for on the device (a *host* edge): its untraced time was
      waiting. On any other thread the untraced time between calls is the host's own work:
      the thread is a chain, and where a launch bound, the path follows it.
    """
    dev = nodes.filter(pl.col("device_node"))
    hst = nodes.filter(~pl.col("device_node"))
    waits = _event_edges(dev, hst)
    if hst.is_empty() or hst.filter(matches(hst, "name", STREAM_WAIT)).is_empty():
        waits = pl.concat([waits, _order_edges(dev)])
    launch, delay = _bound_launch_edges(dev, hst, waits)
    parts = [launch, delay, _sync_edges(dev, hst), _completion_edges(dev, hst), waits]
    return pl.concat([p.select(list(EDGE_SCHEMA)).cast(EDGE_SCHEMA) for p in parts])  # type: ignore


QUEUED_NS = 10_000
"""The most a device's queue latency is taken to be: an activity that started within its
device's queue latency (twice the median gap between consecutive activities of the device's
streams, at most this) of its stream's previous activity was queued behind it, as a kernel
the host issued early starts a few µs after the one before. Its start is explained by its
stream; no order edge is guessed for it. The same bound says when a device-only activity
waited for something unrecorded (critical_solve.UNSEEN_GAP_NS)."""


def _order_edges(dev: pl.DataFrame) -> pl.DataFrame:
    """Per device activity and other stream of its device, an edge from that stream's latest
    activity that ended at or before its start (ties: the later in its chain), unless its
    own stream explains the start (it ended before that stream was free, or the activity
    started within the device's queue latency of it, :data:`QUEUED_NS`): the order of the
    step across streams, where the trace records no event waits (docs/critical-path.md)."""
    empty = pl.DataFrame(schema=EDGE_SCHEMA)
    if dev.is_empty():
        return empty
    keys = ["host", "rank", "device"]
    acts = dev.select(*keys, "stream", src="id", t="end_ns").sort("t", "src")
    q = dev.select(*keys, "stream", dst="id", t="start_ns").sort("t")
    # the latest end at or before the start on the device, then on another stream: the
    # latest of the device's streams (one asof per stream would be a join per stream);
    # an activity's own stream is its chain, so the latest end of a *different* stream is
    # the max over the other streams' latest ends: found by the asof on each stream
    streams = acts.select(*keys, o_stream="stream").unique()
    q = q.join(streams, on=keys).filter(pl.col("o_stream") != pl.col("stream")).sort("t")
    got = q.join_asof(acts.rename({"stream": "o_stream"}), on="t",
                      by=[*keys, "o_stream"], strategy="backward", check_sortedness=False)
    got = got.filter(pl.col("src").is_not_null()).join(
        dev.select(src="id", _e="end_ns"), on="src")
    # one edge per other stream (a kernel may wait for a copy and an all-gather), but not
    # where the node's own stream explains its start: from an activity that ended before
    # that stream was free, or for a node that started within its device's queue latency of
    # it (QUEUED_NS): nothing in the trace says it waited for more (a collective queued
    # behind another on its stream does not wait for the compute that ended meanwhile)
    prev = dev.select(*keys, "id", "chain", "start_ns", "end_ns").sort("id").select(
        *keys, dst="id", _s="start_ns", _p=pl.when(
            pl.col("chain").shift(1) == pl.col("chain")).then(pl.col("end_ns").shift(1)))
    lag = (pl.col("_s") - pl.col("_p")).clip(lower_bound=0)
    prev = prev.with_columns(_g=lag <= (2 * lag.median().over(keys)).clip(
        upper_bound=QUEUED_NS)).select("dst", "_p", _g=pl.col("_g").fill_null(False))
    best = got.join(prev, on="dst", how="left").filter(
        pl.col("_p").is_null() | ((pl.col("_e") >= pl.col("_p")) & ~pl.col("_g"))
    ).sort("dst", "src")
    if best.is_empty():
        return empty
    return best.select("src", "dst", side=pl.lit("S"), point=pl.lit("E"), kind=pl.lit("order"))


def _bound_launch_edges(dev: pl.DataFrame, hst: pl.DataFrame, waits: pl.DataFrame
                        ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the launch edges that bind, the host-delay edges): :func:`local_edges`."""
    empty = pl.DataFrame(schema=EDGE_SCHEMA)
    ln = _launches(dev, hst)
    if ln.is_empty():
        return empty, empty
    # the latest of a device activity's other start sources: its stream's previous
    # activity, and its event or order waits
    prev = dev.select("id", "chain", "end_ns").sort("id").with_columns(
        p_src=pl.when(pl.col("chain").shift(1) == pl.col("chain")).then(pl.col("id").shift(1)),
        p_t=pl.when(pl.col("chain").shift(1) == pl.col("chain")).then(
            pl.col("end_ns").shift(1))).select(dst="id", src="p_src", t="p_t")
    other = waits.filter(pl.col("side") == "S").select("src", "dst").join(
        dev.select(src="id", t="end_ns"), on="src")
    cand = pl.concat([prev.filter(pl.col("src").is_not_null()), other.select("dst", "src", "t")])
    best = cand.sort("dst", "t", pl.col("src"), descending=[False, False, True]).group_by(
        "dst", maintain_order=True).agg(o_src=pl.col("src").last(), o_t=pl.col("t").last())
    ln = ln.join(best, left_on="id", right_on="dst", how="left").with_columns(
        l_t=pl.when(pl.col("l_sync")).then(pl.col("l_s")).otherwise(pl.col("l_e")))
    # the launch binds where it came, with the device's launch latency, after every other
    # source (ties: the device's). The latency is the least lag from a launch call's end to
    # its activity's start on the device: no activity starts sooner after its launch (the
    # graph's binding rule uses the same, critical_solve._launch_latency)
    k = dev.select("id", "host", "rank", "device", k_s="start_ns")
    # (one launch alone on a device says nothing of its latency: its own lag would make it
    # bind whatever else it waited for, as a program queued behind the previous run; 0)
    ln = ln.join(k, on="id", how="left").with_columns(
        lat=pl.when(pl.len().over("host", "rank", "device") > 1).then(
            (pl.col("k_s") - pl.col("l_t")).clip(lower_bound=0).min().over(
                "host", "rank", "device")).otherwise(0))
    ln = ln.with_columns(bound=pl.col("o_t").is_null()
                         | (pl.col("l_t") + pl.col("lat") > pl.col("o_t")))
    # a wait past the launch latency spent with the host in a blocking call is the call's
    # (kind "blocked", component sync: analyze.blocked), not launch latency
    sync = hst.filter(pl.col("sync").fill_null(False)).select("host", "rank", "start_ns",
                                                             "end_ns")
    late = ln.select("host", "rank", start_ns=pl.col("l_t") + pl.col("lat"), end_ns="k_s")
    ln = ln.with_columns(blocked(late, sync, ["host", "rank"]).alias("_blocked")).drop(
        "k_s", "lat", "host", "rank", "device")
    launch = ln.filter(pl.col("bound")).select(
        "src", dst="id", side=pl.lit("S"),
        point=pl.when(pl.col("l_sync")).then(pl.lit("S")).otherwise(pl.lit("E")),
        kind=pl.when(pl.col("_blocked")).then(pl.lit("blocked")).otherwise(pl.lit("launch")))
    held = _held_back(ln, dev)
    # a held-back thread: each launch call waited for what its activity waited for on the
    # device (the latest of its other sources: the device came within the observed lag of
    # being ready for the activity, and the host issued it); a call whose activity waited for
    # nothing else, for its device's progress (the activity that ended last before the call
    # began, on any of its streams)
    hl = ln.join(held.filter(pl.col("held")), on=["l_pid", "l_tid"]).join(
        dev.select(o_src="id", o_s="start_ns"), on="o_src", how="left")
    # the activity it waited for had started when the call began (it may end after: the host
    # issued the next activity a little before the device was ready for it); an edge back in
    # time that could close a cycle through a collective is dropped when it does
    # (critical_solve.build_graph)
    gated = hl.filter(pl.col("o_src").is_not_null() & (pl.col("o_s") <= pl.col("l_s"))).sort(
        "src", "o_t", "o_src").group_by("src", maintain_order=True).agg(
        o_src=pl.col("o_src").last())
    mine = hl.join(gated.select("src"), on="src", how="anti").join(
        dev.select("id", "host", "rank", "device"), on="id").sort("id").group_by(
        "src", maintain_order=True).agg(pl.col("host", "rank", "device", "l_s").first())
    acts = dev.select("host", "rank", "device", o_src="id", l_s="end_ns").sort("l_s", "o_src")
    waited = mine.sort("l_s").join_asof(acts, on="l_s", by=["host", "rank", "device"],
                                        strategy="backward", check_sortedness=False).filter(
        pl.col("o_src").is_not_null()).select("src", "o_src")
    delay = pl.concat([gated, waited]).sort("src").select(
        src="o_src", dst="src", side=pl.lit("S"), point=pl.lit("E"), kind=pl.lit("host"))
    return launch, delay


HELD_LEAD_NS = 100_000
"""A thread whose launches mostly came before their streams were free, but by a median of
less than this, kept pace with a busy device instead of running ahead: it was held back by it
(:func:`_held_back`)."""


HELD_AHEAD_SHARE = 0.25
"""The share of a thread's launches that must come before their streams were free for it to
count as held back (with :data:`HELD_LEAD_NS`): a host paced by the device has about half."""


def _held_back(ln: pl.DataFrame, dev: pl.DataFrame) -> pl.DataFrame:
    """Per launching thread (``l_pid``, ``l_tid``): ``held``, whether the device held it back.

    A host that works ahead of the device launches ever further ahead (milliseconds); one
    that is behind leaves its streams waiting (nearly every launch binds). A thread a good
    part of whose launches (:data:`HELD_AHEAD_SHARE`) came before their streams were free,
    yet only a little before (median lead under :data:`HELD_LEAD_NS`), kept pace with a busy
    device: its untraced time between launches was waiting for the device (a full queue, a
    runtime that throttles), not work. (A host paced by the device lands on either side of
    the moment its stream frees by a few µs of jitter: about half its launches bind.) Its
    launches that did bind are then on the path only for the idle they caused."""
    lead = ln.join(dev.select(id="id", k_s="start_ns"), on="id").with_columns(
        lead=pl.col("k_s") - pl.col("l_t"))
    return lead.group_by("l_pid", "l_tid").agg(
        held=(~pl.col("bound")).mean().ge(HELD_AHEAD_SHARE)
        & pl.col("lead").filter(~pl.col("bound")).median().lt(HELD_LEAD_NS))


def _launches(dev: pl.DataFrame, hst: pl.DataFrame) -> pl.DataFrame:
    """Each device node's launch call (the latest-ending host node with its correlation id):
    dst, src, the call's start and end, whether it blocks."""
    calls = hst.filter(pl.col("correlation_id").is_not_null()).sort("end_ns").group_by(
        "host", "rank", "correlation_id").agg(src=pl.col("id").last(),
                                              l_s=pl.col("start_ns").last(),
                                              l_e=pl.col("end_ns").last(),
                                              l_sync=pl.col("sync").last(),
                                              l_pid=pl.col("pid").last(),
                                              l_tid=pl.col("tid").last())
    return dev.filter(pl.col("correlation_id").is_not_null()).join(
        calls, on=["host", "rank", "correlation_id"]).select("id", "src", "l_s", "l_e",
                                                             "l_sync", "l_pid", "l_tid")


def _sync_edges(dev: pl.DataFrame, hst: pl.DataFrame) -> pl.DataFrame:
    """A sync call waits (B side) for the latest activity of each device of its rank that
    ended before the call returned."""
    sync = hst.filter(pl.col("sync")).select("host", "rank", dst="id", end_ns="end_ns")
    devices = dev.select("host", "rank", "device").unique()
    q = sync.join(devices, on=["host", "rank"]).sort("end_ns")
    acts = dev.select("host", "rank", "device", "end_ns", src="id").sort("end_ns")
    got = q.join_asof(acts, on="end_ns", by=["host", "rank", "device"], strategy="backward",
                      check_sortedness=False)
    return got.filter(pl.col("src").is_not_null()).select(
        "src", "dst", side=pl.lit("B"), point=pl.lit("E"), kind=pl.lit("sync"))


COMPLETION = r"^CompleteCallbacks$|^CommonPjRtBuffer::Await$"
"""A host event that starts once the device is done, not a call that blocks in the trace:
the TPU runtime told that a program run ended; XLA:CPU's ``Await`` of a result, written as
an instant when the wait returns (the wait itself is not traced)."""


def _completion_edges(dev: pl.DataFrame, hst: pl.DataFrame) -> pl.DataFrame:
    """A completion (:data:`COMPLETION`) starts after (S side, an ``event`` edge) the latest
    activity of each device of its rank that ended at or before its start: the time from
    that end to it is the runtime's notice of the device's result."""
    done = hst.filter(matches(hst, "name", COMPLETION)).select(
        "host", "rank", dst="id", t="start_ns")
    if done.is_empty():
        return pl.DataFrame(schema=EDGE_SCHEMA)
    devices = dev.select("host", "rank", "device").unique()
    q = done.join(devices, on=["host", "rank"]).sort("t")
    acts = dev.select("host", "rank", "device", t="end_ns", src="id").sort("t", "src")
    got = q.join_asof(acts, on="t", by=["host", "rank", "device"], strategy="backward",
                      check_sortedness=False)
    return got.filter(pl.col("src").is_not_null()).select(
        "src", "dst", side=pl.lit("S"), point=pl.lit("E"), kind=pl.lit("event"))


def _event_edges(dev: pl.DataFrame, hst: pl.DataFrame) -> pl.DataFrame:
    """A device node whose stream was told to wait (a stream-wait call between the launch of
    the stream's previous activity and its own, on the launching thread) waits for the
    latest activity of another stream of its device that ended before it started."""
    waits = hst.filter(matches(hst, "name", STREAM_WAIT)).select(
        "host", "rank", l_pid="pid", l_tid="tid", w_s="start_ns").sort("w_s")
    empty = pl.DataFrame(schema=EDGE_SCHEMA)
    if waits.is_empty():
        return empty
    ln = _launches(dev, hst)
    d = dev.join(ln.select("id", "l_s", "l_pid", "l_tid"), on="id", how="left").sort(
        "chain", "start_ns").with_columns(prev_l=pl.col("l_s").shift(1).over("chain"))
    d = d.filter(pl.col("l_s").is_not_null())
    # the latest wait call of the launching thread before this launch, after the previous one
    got = d.sort("l_s").join_asof(waits.with_columns(l_s=pl.col("w_s")), on="l_s",
                                  by=["host", "rank", "l_pid", "l_tid"], strategy="backward",
                                  check_sortedness=False)
    told = got.filter(pl.col("w_s").is_not_null() & (pl.col("prev_l").is_null()
                                                     | (pl.col("w_s") >= pl.col("prev_l"))))
    if told.is_empty():
        return empty
    streams = dev.select("host", "rank", "device", o_stream="stream").unique()
    q = told.select("host", "rank", "device", "stream", dst="id", start_ns="start_ns").join(
        streams, on=["host", "rank", "device"]).filter(pl.col("o_stream") != pl.col("stream"))
    acts = dev.select("host", "rank", "device", o_stream="stream", start_ns="end_ns",
                      src="id").sort("start_ns")
    got = q.sort("start_ns").join_asof(acts, on="start_ns",
                                       by=["host", "rank", "device", "o_stream"],
                                       strategy="backward", check_sortedness=False)
    best = got.filter(pl.col("src").is_not_null()).join(
        dev.select(src="id", _e="end_ns"), on="src").sort("dst", "_e", "src").group_by(
        "dst", maintain_order=True).agg(src=pl.col("src").last())
    return best.select("src", "dst", side=pl.lit("S"), point=pl.lit("E"), kind=pl.lit("event"))
