"""Per-activity cost (docs/definitions.md#cost-model): ``flops``, ``bytes``, ``dtype``,
``cost_source``, and for
collectives ``msg_bytes`` and ``group_size`` (§6.3).

Sources, strongest first: hardware counters (rocprofv3 PMC, :func:`cost_from_counters`, filled
by the reader with ``cost_source = "counters"`` and kept here), then the HLO of the kernel's
op (:mod:`tracelens.hlo`), else null. The HLO cost is computed once per distinct
(host, program_id, op) and joined onto the events; no per-event Python.

One op execution can launch several kernels (``cudnn-conv.1`` runs ``Im3d2Col`` then a
Tensile GEMM on MI300X). Its cost belongs to the execution, not to each kernel: the op's
*main kernel* (per host, device and op, the kernel name with the largest total time) carries
the op's FLOPs and bytes, its helper kernels carry 0 with ``cost_source = "hlo"``. Sums over
events, per op group, per category and per step then count every execution exactly once.
(XProf gives every kernel the full conv FLOPs, TraceLens gives every kernel a row with the
full FLOPs: both double count; see docs/cost-model.md.)
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import polars as pl

from tracelens.core.model import COMPUTE_CATEGORIES, Notice, Text, Trace, conform, shown_program_id
from tracelens.core.name_dtype import name_dtypes
from tracelens.core.signatures import Signatures

if TYPE_CHECKING:
    from tracelens.core.hlo_model import Module

KEY = ["host", "program_id", "op"]
OP_COST_SCHEMA: dict[str, pl.DataType] = {
    "host": Text, "program_id": pl.Int64, "op": Text, "module": pl.String,
    "cost_kind": pl.String, "collective": pl.String, "detail": pl.String,
    "_flops": pl.Float64, "_bytes": pl.Float64, "_dtype": Text, "_msg_bytes": pl.Int64,
    "_group_size": pl.Int32, "_groups": Text, "_note": Text,
}


_COSTS: "dict[int, tuple[weakref.ref[Module], dict[tuple[int, str], object]]]" = {}


def _costs_of(module: "Module") -> dict[tuple[int, str], object]:
    """The costs worked out so far for ``module``'s instructions, by (computation id,
    instruction name): every host file a process reads shares one decoded object per module
    (``decoded_module``), so the hosts of a job cost each op once per process, not once per
    host. An entry lives as long as its module (it is dropped as the module is freed, before
    its id can name another), and keeps none alive."""
    key = id(module)
    entry = _COSTS.get(key)
    if entry is None or entry[0]() is not module:
        entry = _COSTS[key] = (weakref.ref(module, lambda _: _COSTS.pop(key, None)), {})
    return entry[1]


def op_cost_table(events: pl.DataFrame, modules: pl.DataFrame,
                  hlo_text: Iterable[str | Path] = ()) -> tuple[pl.DataFrame, list[Notice]]:
    """One row per distinct (host, program_id, op) of ``events``: the op's cost per
    execution, and the problems met (modules that failed to decode, ops not in the HLO)."""
    keys = events.lazy().select(*KEY).filter(
        pl.col("op").is_not_null() & pl.col("program_id").is_not_null()).unique() \
        .collect().sort(_lexical(KEY))
    if keys.is_empty() and not hlo_text:  # no HLO op to cost: the HLO decoders stay unloaded
        return pl.DataFrame([], schema=OP_COST_SCHEMA), []
    from tracelens.cost.opcost import instruction_cost
    from tracelens.hlo.index import HloIndex

    index = HloIndex.from_frames(modules, wanted=keys, text_dumps=hlo_text)
    # ops of programs without HLO: one note for them all, not a lookup each (a trace without
    # HLO names as many ops as kernels)
    pairs = keys.select("host", "program_id").unique()
    known = pl.Series([index.module(h, p) is not None for h, p in pairs.iter_rows()],
                      dtype=pl.Boolean)
    lost = keys.join(pairs.filter(~known), on=["host", "program_id"], how="semi")
    missing_module: set[tuple[str, int]] = set(pairs.filter(~known).iter_rows())
    rows = []
    missing_op = 0
    failed: list[str] = []
    for host, pid, op in keys.join(lost, on=KEY, how="anti").iter_rows():
        found = index.lookup(host, pid, op)
        if found is None:  # a row without cost, saying why (the events' cost_note)
            missing_op += 1
            rows.append({"host": host, "program_id": pid, "op": op,
                         "_note": f"op {op!r} is not in the HLO of program "
                                  f"{shown_program_id(pid)}"})
            continue
        module, comp, inst = found
        done, memo = _costs_of(module), (id(comp), inst.name)
        if memo not in done:
            try:
                done[memo] = instruction_cost(module, comp, inst)
            except (IndexError, KeyError, ValueError, ZeroDivisionError, TypeError) as exc:
                done[memo] = exc
        c = done[memo]
        if isinstance(c, Exception):
            failed.append(f"{module.name}({shown_program_id(pid)})/{op}: "
                          f"{type(c).__name__}: {c}")
            rows.append({"host": host, "program_id": pid, "op": op, "module": module.name,
                         "_note": f"the cost of this op could not be computed from its HLO "
                                  f"({type(c).__name__})"})
            continue
        rows.append({"host": host, "program_id": pid, "op": op, "module": module.name,
                     "cost_kind": c.kind, "collective": c.collective, "detail": c.detail,
                     "_flops": c.flops, "_bytes": c.bytes, "_dtype": c.dtype,
                     "_msg_bytes": c.msg_bytes,
                     "_group_size": c.group_size, "_groups": c.groups,
                     "_note": c.note or None})
    problems = list(index.problems)
    if missing_module:
        problems.append(Notice.of("cost.no_hlo", "{n} program(s) named by kernels have no HLO "
                                  "in the trace; their kernels get no cost data",
                                  n=len(missing_module)))
    if missing_op:
        problems.append(Notice.of("cost.op_not_in_hlo", "{n} HLO op name(s) of kernels are not "
                                  "in their program's HLO; those kernels get no cost data",
                                  n=missing_op))
    if failed:
        problems.append(Notice.of("cost.hlo_malformed", "the cost of {n} HLO op(s) could not be "
                                  "computed from their (malformed?) HLO, e.g. {example}; their "
                                  "kernels get no cost data", n=len(failed), example=failed[0]))
    table = pl.DataFrame(rows, schema=OP_COST_SCHEMA)
    if lost.height:  # in key order, as one lookup per key gave them
        table = pl.concat([table, conform(lost.with_columns(_note=pl.format(
            "the trace has no HLO for program {} on this host",
            pl.col("program_id").reinterpret(signed=False))),
            OP_COST_SCHEMA)]).sort(_lexical(KEY))
    return table, problems


def _lexical(columns: list[str]) -> list[pl.Expr]:
    """Sort keys ordering text columns as strings: polars sorts a categorical column
    lexically too, but ~1.5x slower than its strings (150k distinct ops)."""
    return [pl.col(c).cast(pl.String) if c != "program_id" else pl.col(c) for c in columns]


def _per_kernel(events: pl.DataFrame, table: pl.DataFrame,
                sig: Signatures | None = None) -> pl.DataFrame:
    """Per event: whether it is its op's main kernel on its device (``_is_main``: the kernel
    name with the largest total time, ties to the smallest name; kernels without an op and
    alone in their op are), and its op's cost columns from ``table``.

    Worked out once per (host, rank, device, program_id, op, name): with the events'
    :class:`~tracelens.core.signatures.Signatures` (``sig``, whose keys hold those) one row per
    signature, in the order of ``sig.table``; else one row per event, by a join."""
    keys = ["host", "rank", "device", "program_id", "op"]
    dur = (pl.col("end_ns") - pl.col("start_ns")).alias("_d")
    if sig is not None:  # each signature's total time, summed from its events (exact)
        totals = pl.DataFrame({"_s": sig.row, "_d": events.select(dur)["_d"]}).lazy() \
            .group_by("_s").agg(_t=pl.col("_d").sum()).collect()
        coded = sig.table.with_row_index("_s").join(totals, on="_s", how="left") \
            .sort("_s").select(*keys, "name", _d=pl.col("_t").fill_null(0))
    else:
        coded = events.select(*keys, "name", dur)
    # lazy: integer sums are exact in any order (the names are sorted below, lexically)
    per_name = coded.lazy().filter(pl.col("op").is_not_null()).group_by(*keys, "name") \
        .agg(_t=pl.col("_d").sum()).collect()
    per_name = per_name.join(_main_names(per_name, keys), on=keys, how="left",
                             nulls_equal=True).with_columns(
        _is_main=(pl.col("_names") <= 1) | (pl.col("name") == pl.col("_main")))
    per_name = per_name.join(
        table.select("host", "program_id", "op", "_flops", "_bytes", "_dtype", "_msg_bytes",
                     "_group_size", "_groups", "_note"),
        on=["host", "program_id", "op"], how="left", nulls_equal=False)
    out = ["_is_main", "_flops", "_bytes", "_dtype", "_msg_bytes", "_group_size", "_groups",
           "_note"]
    return coded.select(*keys, "name").join(
        per_name.select(*keys, "name", *out), on=[*keys, "name"], how="left",
        nulls_equal=True, maintain_order="left").select(
        pl.col("_is_main").fill_null(True), *out[1:])


def _main_names(per_name: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """Per op group of ``per_name`` (one row per group and kernel name, with its total
    ``_t``): ``_names``, its number of names, and ``_main``, the name with the largest total,
    ties to the smallest name (a null name first, as a sort with nulls first picks it).

    Only the groups of several names are looked at, and only their rows at the largest
    total: sorting every row by total and name would compare 100k+ long names lexically."""
    groups = per_name.group_by(keys).agg(_names=pl.len(), _mx=pl.col("_t").max())
    top = per_name.join(groups.filter(pl.col("_names") > 1), on=keys, how="inner",
                        nulls_equal=True).filter(pl.col("_t") == pl.col("_mx"))
    name = pl.col("name").cast(pl.String)
    main = top.group_by(keys).agg(_main=pl.when(name.null_count() == 0).then(name.min()))
    return groups.drop("_mx").join(main, on=keys, how="left", nulls_equal=True)


def _name_dtype(ev: pl.DataFrame) -> pl.Series:
    """The dtype a GEMM kernel's name says, on the GEMM kernels that no other source gives one
    (the others stay null: their names are not even read)."""
    need = ev.select(((pl.col("kind") == "kernel") & (pl.col("category") == "gemm")
                      & pl.col("dtype").is_null() & pl.col("_dtype").is_null())
                     .fill_null(False)).to_series()
    out = pl.repeat(None, ev.height, dtype=Text, eager=True).alias("_name_dtype")  # (no list)
    if need.any():
        out = out.scatter(need.arg_true(), name_dtypes(ev["name"].filter(need)))
    return out


def annotate_events(events: pl.DataFrame, table: pl.DataFrame,
                    sig: Signatures | None = None) -> pl.DataFrame:
    """Fill the cost columns of ``events`` from an :func:`op_cost_table` (counters win);
    ``sig``: the events' :class:`~tracelens.core.signatures.Signatures` when the caller has them."""
    if events.is_empty():
        return events
    found = _per_kernel(events, table, sig)
    if sig is not None:
        firsts = _signature_rows(events, sig)
        if firsts is not None:  # every output is a function of the signature: worked out
            done = _annotated(firsts.hstack(found))  # per signature, then spread
            return events.with_columns(sig.spread(done[c]) for c in _OUTPUTS)
        found = pl.DataFrame([sig.spread(c) for c in found.get_columns()])
    return _annotated(events.hstack(found)).select(events.columns)


_TRACE_COSTS = ("flops", "bytes", "dtype", "cost_source", "cost_note", "msg_bytes",
                "group_size", "groups")
"""The cost columns a reader may fill per event (from shapes or counters)."""
_OUTPUTS = (*_TRACE_COSTS, "dtype_source")
"""What :func:`_annotated` writes."""


def _signature_rows(events: pl.DataFrame, sig: Signatures) -> pl.DataFrame | None:
    """The first event of each signature (in ``sig.table``'s order), with the columns
    :func:`_annotated` reads, when those are the same on every event of a signature: the
    signature's keys are, and so is the category when the classifier ran on signatures; the
    reader's cost columns are when none is filled (XSpace). Else None: the events are
    annotated one by one."""
    if any(events[c].null_count() != events.height for c in _TRACE_COSTS):
        return None
    firsts = sig.row.arg_unique()  # in first-seen order, as signature ids count up
    if not sig.row.gather(firsts).equals(pl.int_range(sig.table.height, dtype=sig.row.dtype,
                                                      eager=True), check_names=False):
        return None
    rows = events.select("kind", "category", "name", "op", "program_id", *_TRACE_COSTS)[firsts]
    if not sig.spread(rows["category"]).equals(events["category"]):
        return None
    return rows


def _annotated(ev: pl.DataFrame) -> pl.DataFrame:
    """The cost columns of ``ev`` (events, or one event per signature) from the HLO costs of
    :func:`_per_kernel` beside them (the helper columns stay)."""
    ev = ev.with_columns(_name_dtype=_name_dtype(ev))
    helper = ~pl.col("_is_main") & pl.col("_flops").is_not_null()
    hlo_flops = pl.when(helper).then(0.0).otherwise(pl.col("_flops"))
    hlo_bytes = pl.when(~pl.col("_is_main") & pl.col("_bytes").is_not_null()).then(0.0) \
        .otherwise(pl.col("_bytes"))
    # the hardware's counters, and XLA's own per-op figures on TPU (cost_source "trace":
    # what XProf sums), win over the HLO cost rules
    own = pl.col("cost_source").is_in(["counters", "trace"])
    has_hlo = pl.col("_flops").is_not_null() | pl.col("_bytes").is_not_null() \
        | pl.col("_msg_bytes").is_not_null()
    kernel = pl.col("kind") == "kernel"
    ev = ev.with_columns(
        flops=pl.when(own | ~kernel).then(pl.col("flops"))
        .otherwise(pl.coalesce(hlo_flops, pl.col("flops"))),
        bytes=pl.when(own | ~kernel).then(pl.col("bytes"))
        .otherwise(pl.coalesce(hlo_bytes, pl.col("bytes"))),
        dtype=pl.coalesce(pl.col("dtype"), pl.col("_dtype"), pl.col("_name_dtype")),
        dtype_source=pl.when(pl.col("dtype").is_not_null()).then(
            pl.when(pl.col("cost_source").is_in(["shapes", "counters"]))
            .then(pl.col("cost_source")).otherwise(_text("trace")))
        .when(pl.col("_dtype").is_not_null()).then(_text("hlo"))
        .when(pl.col("_name_dtype").is_not_null()).then(_text("name"))
        .otherwise(_text(None)),
        cost_source=pl.when(pl.col("cost_source").is_not_null()).then(pl.col("cost_source"))
        .when(has_hlo & kernel).then(_text("hlo")).otherwise(_text(None)),
        msg_bytes=pl.coalesce(pl.col("msg_bytes"), pl.col("_msg_bytes")),
        group_size=pl.coalesce(pl.col("group_size"), pl.col("_group_size")),
        groups=pl.coalesce(pl.col("groups"), pl.col("_groups")),
    )
    return ev.with_columns(cost_note=cost_note())


def cost_note() -> pl.Expr:
    """Why a compute kernel (category not collective or memory) has no FLOPs, null otherwise:
    the op's reason from the HLO cost rules, or what the trace lacks."""
    compute = pl.col("category").is_in(COMPUTE_CATEGORIES).fill_null(False)
    reason = (pl.when(pl.col("cost_note").is_not_null()).then(pl.col("cost_note"))
              .when(pl.col("cost_source") == "counters")
              .then(_text("the hardware counters of this dispatch hold no FLOP counter"))
              .when(pl.col("_note").is_not_null()).then(pl.col("_note"))
              .when(pl.col("op").is_null()).then(_text("the kernel names no HLO op"))
              .when(pl.col("program_id").is_null())
              .then(_text("the kernel's HLO op has no program id"))
              .otherwise(_text("no cost rule gave FLOPs")))
    return pl.when((pl.col("kind") == "kernel") & compute & pl.col("flops").is_null()) \
        .then(reason).otherwise(_text(None))


def _text(value: str | None) -> pl.Expr:
    """A literal of the event frames' text dtype (a plain string literal would turn a
    when/then of text columns into strings, hashed again to encode them)."""
    return pl.lit(value, dtype=Text)


def with_hlo_kind(events: pl.DataFrame, table: pl.DataFrame) -> pl.DataFrame:
    """Add ``hlo``: what each event's HLO instruction computes (the classifier's ``hlo``
    signal), null when the trace has no HLO for it. A collective's is ``collective:<opcode>``
    (``collective:all-reduce``): JAX names instructions after its primitives (``psum.13``), so
    only the HLO says which collective an op is."""
    return events.with_columns(hlo_kinds(events, table))


def hlo_kinds(keys: pl.DataFrame, table: pl.DataFrame) -> pl.Series:
    """:func:`with_hlo_kind`'s ``hlo`` of each row of ``keys`` (host, program_id, op): of
    the events, or of their :class:`~tracelens.core.signatures.Signatures`' table."""
    kind = pl.when(pl.col("collective").is_not_null()).then(
        pl.concat_str(pl.col("cost_kind"), pl.lit(":"), pl.col("collective"))) \
        .otherwise(pl.col("cost_kind"))
    return keys.select(KEY).join(table.select(*KEY, hlo=kind), on=KEY, how="left",
                                 maintain_order="left")["hlo"]  # narrow: no copy of events


def annotate(trace: Trace, hlo_text: Iterable[str | Path] = (),
             table: tuple[pl.DataFrame, list[Notice]] | None = None,
             sig: Signatures | None = None) -> Trace:
    """Fill the cost columns of ``trace.events`` from the trace's HLO (and text dumps), keep
    the per-op table in ``trace.meta.op_costs``, and record problems as warnings.
    ``table`` is an :func:`op_cost_table` result already computed for these events; ``sig``
    their :class:`~tracelens.core.signatures.Signatures`, when the caller has them."""
    table, problems = table if table is not None else op_cost_table(
        trace.events, trace.modules, hlo_text)
    for p in problems:
        trace.meta.warn(p)
    trace.events = annotate_events(trace.events, table, sig)
    trace.meta.op_costs = table
    return trace
