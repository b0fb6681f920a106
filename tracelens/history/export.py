"""``history export``: the run store as Parquet files for dashboards.

One folder, one file per table, every row keyed by the run's ``label``: ``runs.parquet``
(one row per run, its tags as ``tag.<key>`` columns), ``components.parquet``,
``categories.parquet``, ``kernels.parquet``, ``comm.parquet`` and ``inputs.parquet``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import polars as pl

from tracelens.core.errors import TraceInputError
from tracelens.results.history import RunRecord

_RUN_SCHEMA = {"label": pl.String, "recorded_at": pl.String, "series": pl.String,
               "hardware": pl.String, "devices": pl.Int64, "hosts": pl.Int64,
               "steps": pl.Int64, "steps_source": pl.String, "step_ns": pl.Float64,
               "mfu": pl.Float64, "tool_version": pl.String, "inputs_hash": pl.String}


def frames(runs: Sequence[RunRecord]) -> dict[str, pl.DataFrame]:
    """The store's tables as frames (module doc), runs in the order recorded."""
    keys = sorted({k for r in runs for k in r.tags})
    base = pl.DataFrame([{c: getattr(r, c) for c in _RUN_SCHEMA} for r in runs],
                        schema=_RUN_SCHEMA, orient="row") if runs else \
        pl.DataFrame(schema=_RUN_SCHEMA)
    tags = pl.DataFrame({f"tag.{k}": [r.tags.get(k) for r in runs] for k in keys},
                        schema={f"tag.{k}": pl.String for k in keys})
    out = {"runs": pl.concat([base, tags], how="horizontal") if keys else base}

    def long(name: str, schema: dict[str, pl.DataType], rows: list[tuple]) -> None:
        out[name] = pl.DataFrame(rows, schema={"label": pl.String, **schema}, orient="row")

    long("components", {"component": pl.String, "ns": pl.Float64},
         [(r.label, c, ns) for r in runs for c, ns in r.components.items()])
    long("categories", {"category": pl.String, "count": pl.Int64, "sum_ns": pl.Int64,
                        "exclusive_ns": pl.Int64},
         [(r.label, c.category, c.count, c.sum_ns, c.exclusive_ns)
          for r in runs for c in r.categories])
    long("kernels", {"category": pl.String, "program": pl.String, "op": pl.String,
                     "key": pl.String, "name": pl.String, "ns_per_step": pl.Float64,
                     "count_per_step": pl.Float64},
         [(r.label, k.category, k.program, k.op, k.key, k.name, k.ns_per_step,
           k.count_per_step) for r in runs for k in r.kernels])
    long("comm", {"type": pl.String, "count": pl.Int64, "sum_ns": pl.Int64,
                  "exposed_ns": pl.Int64},
         [(r.label, c.type, c.count, c.sum_ns, c.exposed_ns) for r in runs for c in r.comm])
    long("inputs", {"path": pl.String, "sha256": pl.String, "bytes": pl.Int64},
         [(r.label, i.path, i.sha256, i.bytes) for r in runs for i in r.inputs])
    return out


def export_parquet(runs: Sequence[RunRecord], out: Path) -> list[Path]:
    """Write :func:`frames` under folder ``out`` (created); the files written."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TraceInputError(out, f"cannot create the folder: {exc.strerror or exc}") from None
    if not out.is_dir():
        raise TraceInputError(out, "not a folder")
    from tracelens.api.outputs import check_target

    tables = frames(runs)
    for name in tables:  # every file checked before any is written
        check_target(out / f"{name}.parquet", "-o")
    written = []
    for name, df in tables.items():
        path = out / f"{name}.parquet"
        try:
            df.write_parquet(path)
        except OSError as exc:
            raise TraceInputError(path, f"cannot write: {exc.strerror or exc}") from None
        written.append(path)
    return written
