"""FLOPs and HBM bytes per kernel dispatch from rocprofv3 PMC counters
(docs/cost-model.md#6-rocprofv3-pmc-counters-tracelenscostcounterscost_from_counters: counters
are the strongest cost source).

Formulas: rocprofiler-compute (shared/reference/rocprof.md §5.4):

- MFMA FLOPs = 512 × ``SQ_INSTS_VALU_MFMA_MOPS_<T>`` for T in F16, BF16, F32, F64, F8, F6F4,
  XF32 (the counter is math ops / 512); integer MFMA ops = 512 × ``..._MOPS_I8`` (counted as
  int8 "FLOPs" so the int8 roofline works).
- VALU FLOPs = 64 × (``SQ_INSTS_VALU_ADD_<T>`` + ``MUL`` + ``TRANS`` + 2 × ``FMA``) for T in
  F16, F32, F64 (assumes full 64-lane waves, as rocprof-compute does).
- HBM bytes, MI300/MI350 (``TCC_EA0_*``) = 128 × TCC_BUBBLE + 32 × RDREQ_32B
  + 64 × (RDREQ − BUBBLE − RDREQ_32B) + 32 × (WRREQ − WRREQ_64B) + 64 × WRREQ_64B;
  MI200 (``TCC_EA_*``) = 32 × RDREQ_32B + 64 × (RDREQ − RDREQ_32B) + 64 × WRREQ_64B
  + 32 × (WRREQ − WRREQ_64B);
  else 1024 × (``FETCH_SIZE`` + ``WRITE_SIZE``): rocprofiler-sdk's derived counters, in KiB,
  defined by the same request formulas divided by 1024. ``FETCH_SIZE`` alone is reads only:
  bytes stay unknown.

**Input schema** (what a reader passes): one row per kernel dispatch, any other columns kept
as they are; one numeric column per counter, named as rocprofv3 names the counter
(case-insensitive; a trailing ``_sum`` as rocprof-compute writes it is accepted), each value
**summed over all hardware instances** (XCDs, shader engines, TCC channels) of that dispatch;
null where the counter was not collected for that dispatch (counters are often collected in
several passes). FLOPs are null unless at least one FLOP counter is non-null on the row; bytes
are null unless the full HBM counter set of one formula is non-null on the row.

Output: the input plus ``flops`` (f64), ``bytes`` (f64), ``dtype`` (the type with the most
ops: MFMA types first, else VALU types) and ``cost_source`` (``"counters"`` where flops or
bytes is known, else null).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from tracelens.core.model import EVENT_SCHEMA, CounterFacts, Notice, Trace

MFMA_TYPES = {"F16": "fp16", "BF16": "bf16", "F32": "fp32", "F64": "fp64", "F8": "fp8",
              "F6F4": "fp4", "XF32": "tf32", "I8": "int8"}
VALU_TYPES = {"F16": "fp16", "F32": "fp32", "F64": "fp64"}
VALU_OPS = {"ADD": 1, "MUL": 1, "TRANS": 1, "FMA": 2}
HBM_MI300 = ("TCC_EA0_RDREQ", "TCC_EA0_RDREQ_32B", "TCC_EA0_WRREQ", "TCC_EA0_WRREQ_64B",
             "TCC_BUBBLE")
HBM_MI200 = ("TCC_EA_RDREQ", "TCC_EA_RDREQ_32B", "TCC_EA_WRREQ", "TCC_EA_WRREQ_64B")
HBM_DERIVED = ("FETCH_SIZE", "WRITE_SIZE")
FLOP_COUNTERS = tuple(f"SQ_INSTS_VALU_MFMA_MOPS_{t}" for t in MFMA_TYPES) + tuple(
    f"SQ_INSTS_VALU_{op}_{t}" for t in VALU_TYPES for op in VALU_OPS)
"""Every counter that contributes FLOPs: a counter set without any leaves FLOPs unknown."""


def _canonical(columns: list[str]) -> dict[str, str]:
    """Upper-case counter name (``_sum`` removed) -> the frame's column name."""
    out = {}
    for c in columns:
        key = c.upper()
        key = key[:-4] if key.endswith("_SUM") else key
        out.setdefault(key, c)
    return out


def _all_present(cols: dict[str, str], names: tuple[str, ...]) -> pl.Expr | None:
    if not all(n in cols for n in names):
        return None
    return pl.all_horizontal([pl.col(cols[n]).is_not_null() for n in names])


def cost_from_counters(df: pl.DataFrame) -> pl.DataFrame:
    """Add ``flops``, ``bytes``, ``dtype``, ``cost_source`` computed from PMC counter columns
    (schema in the module docstring). Existing columns of those names are replaced."""
    cols = _canonical(df.columns)

    def c(name: str) -> pl.Expr:
        return pl.col(cols[name]).cast(pl.Float64)

    per_type: dict[str, list[pl.Expr]] = {}
    for t, dtype in MFMA_TYPES.items():
        name = f"SQ_INSTS_VALU_MFMA_MOPS_{t}"
        if name in cols:
            per_type.setdefault(f"mfma:{dtype}", []).append(512.0 * c(name))
    for t, dtype in VALU_TYPES.items():
        for op, mult in VALU_OPS.items():
            name = f"SQ_INSTS_VALU_{op}_{t}"
            if name in cols:
                per_type.setdefault(f"valu:{dtype}", []).append(64.0 * mult * c(name))
    type_exprs = {k: pl.sum_horizontal(v) for k, v in per_type.items()}
    any_flop_counter = pl.any_horizontal([e.is_not_null() for v in per_type.values()
                                          for e in v]) if per_type else pl.lit(False)
    flops = pl.when(any_flop_counter).then(pl.sum_horizontal(list(type_exprs.values()))
                                           if type_exprs else pl.lit(None)) \
        .otherwise(None).cast(pl.Float64)

    mi300 = _all_present(cols, HBM_MI300)
    mi200 = _all_present(cols, HBM_MI200)
    derived = _all_present(cols, HBM_DERIVED)
    bytes_expr = pl.lit(None, dtype=pl.Float64)
    if derived is not None:
        bytes_expr = pl.when(derived).then(1024.0 * (c("FETCH_SIZE") + c("WRITE_SIZE")))
    if mi200 is not None:
        b200 = (32 * c("TCC_EA_RDREQ_32B") + 64 * (c("TCC_EA_RDREQ") - c("TCC_EA_RDREQ_32B"))
                + 64 * c("TCC_EA_WRREQ_64B") + 32 * (c("TCC_EA_WRREQ") - c("TCC_EA_WRREQ_64B")))
        bytes_expr = pl.when(mi200).then(b200).otherwise(bytes_expr)
    if mi300 is not None:
        b300 = (128 * c("TCC_BUBBLE") + 32 * c("TCC_EA0_RDREQ_32B")
                + 64 * (c("TCC_EA0_RDREQ") - c("TCC_BUBBLE") - c("TCC_EA0_RDREQ_32B"))
                + 32 * (c("TCC_EA0_WRREQ") - c("TCC_EA0_WRREQ_64B"))
                + 64 * c("TCC_EA0_WRREQ_64B"))
        bytes_expr = pl.when(mi300).then(b300).otherwise(bytes_expr)

    # dtype: the MFMA type with the most ops, else the VALU type with the most ops.
    dtype = pl.lit(None, dtype=pl.String)
    for prefix in ("valu:", "mfma:"):  # later wins: MFMA first
        keys = [k for k in type_exprs if k.startswith(prefix)]
        if not keys:
            continue
        best = pl.lit(None, dtype=pl.String)
        best_val = pl.lit(0.0)
        for k in keys:
            v = type_exprs[k].fill_null(0.0)
            best = pl.when(v > best_val).then(pl.lit(k.split(":")[1])).otherwise(best)
            best_val = pl.max_horizontal(best_val, v)
        dtype = pl.coalesce(best, dtype)
    out = df.with_columns(flops=flops, bytes=bytes_expr.cast(pl.Float64))
    out = out.with_columns(
        dtype=pl.when(pl.col("flops").is_not_null()).then(dtype).otherwise(None),
        cost_source=pl.when(pl.col("flops").is_not_null() | pl.col("bytes").is_not_null())
        .then(pl.lit("counters")).otherwise(None))
    return out


NO_FLOPS = {  # why a dispatch has no FLOPs, in rocprofv3's terms (the events' cost_note)
    "no_counters": "no hardware counters recorded (FLOPs need rocprofv3 --pmc with "
                   "SQ_INSTS_VALU_* counters)",
    "no_flop_counter": "the counters collected hold no FLOP counter (SQ_INSTS_VALU_*)",
}
_COSTS = {c: EVENT_SCHEMA[c] for c in ("flops", "bytes", "dtype", "cost_source", "cost_note")}


def cost_counters(trace: Trace) -> list[tuple[int, int, Notice]]:
    """The load stage of counter costs: ``flops``, ``bytes``, ``dtype``,
    ``cost_source`` and ``cost_note`` of each kernel of a rank whose reader handed over its
    counters (the reader's :class:`~tracelens.core.model.CounterFacts`, then dropped), right after
    reading; null where the counters collected do not determine them. Returns one note per
    process that recorded counters, (where in the file's notices, rank, the notice), for
    :func:`tracelens.loading.devices`'s ``insert_notes``."""
    handed = trace.meta.facts(CounterFacts)
    if not handed:
        return []
    trace.meta.format_facts = [f for f in trace.meta.format_facts
                               if not isinstance(f, CounterFacts)]
    facts = [c for f in handed for c in f.processes]
    if not facts:
        return []
    file = Path(trace.meta.sources[0]["path"]).name
    parts, notes = [], []
    for f in facts:
        costed, note = _costed(f.values, f.unmatched)
        parts.append(costed.with_columns(rank=pl.lit(f.rank, dtype=pl.Int32)))
        if note:
            notes.append((f.notes_at, f.rank, note.about(file)))
    costs = pl.concat(parts, how="vertical")
    kernels = trace.events.with_row_index("_i").filter(pl.col("kind") == "kernel")
    if not kernels["rank"].equals(costs["rank"]):  # the reader's order: a parser bug
        raise AssertionError("counter facts do not follow the reader's kernel events")
    idx = kernels["_i"]
    trace.events = trace.events.with_columns(
        trace.events[name].cast(dtype).scatter(idx, costs[name].cast(dtype))
        for name, dtype in _COSTS.items())
    return notes


def _costed(values: pl.DataFrame, unmatched: int) -> tuple[pl.DataFrame, Notice | None]:
    """The cost columns of one process's kernels from their counter columns, and its note
    (None: the process recorded no counters)."""
    names = values.columns
    if not names:
        flops = pl.repeat(None, values.height, dtype=pl.Float64, eager=True).alias("flops")
        return flops.to_frame().with_columns(bytes=pl.lit(None, pl.Float64),
                                             dtype=pl.lit(None, pl.String),
                                             cost_source=pl.lit(None, pl.String),
                                             cost_note=pl.lit(NO_FLOPS["no_counters"])), None
    any_pmc = pl.any_horizontal(pl.col(names).is_not_null())
    out = cost_from_counters(values).select(
        "flops", "bytes", "dtype", "cost_source",
        cost_note=pl.when(pl.col("flops").is_not_null()).then(None)
        .when(any_pmc).then(pl.lit(NO_FLOPS["no_flop_counter"]))
        .otherwise(pl.lit(NO_FLOPS["no_counters"])))
    with_pmc = values.select(any_pmc.sum()).item()
    n_flops, n_bytes = out["flops"].is_not_null().sum(), out["bytes"].is_not_null().sum()
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    template = ("hardware counters ({shown}) on {with_pmc} of {dispatches} kernel dispatches: "
                "FLOPs from counters on {n_flops}, HBM bytes on {n_bytes}")
    if not {n.upper() for n in names} & set(FLOP_COUNTERS):
        template += ("; FLOPs unknown: no FLOP counter was collected "
                     "(SQ_INSTS_VALU_MFMA_MOPS_*, SQ_INSTS_VALU_{{ADD,MUL,FMA,TRANS}}_F*)")
    if n_bytes < with_pmc:
        template += ("; HBM bytes need TCC_EA0_{{RDREQ,RDREQ_32B,WRREQ,WRREQ_64B}} + "
                     "TCC_BUBBLE, TCC_EA_{{RDREQ,RDREQ_32B,WRREQ,WRREQ_64B}}, or FETCH_SIZE + "
                     "WRITE_SIZE")
    if unmatched:
        template += "; {unmatched} dispatch ids with counters match no kernel dispatch"
    return out, Notice.of("cost.counters", template, shown=shown, with_pmc=with_pmc,
                          dispatches=values.height, n_flops=n_flops, n_bytes=n_bytes,
                          unmatched=unmatched)
