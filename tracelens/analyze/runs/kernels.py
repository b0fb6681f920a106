"""The kernels of a run as compare and scaling match them: names with their clone suffixes
dropped, each program's key, and per-kernel time per window (a host's part, then the job's)."""

from __future__ import annotations

import polars as pl
from tracelens.analyze.compute.kernel_table import kernel_table
from tracelens.analyze.timeline.breakdown import clip_to_windows
from tracelens.core.model import Trace


def run_windows(trace: Trace) -> pl.DataFrame:
    """Step windows per rank, or one whole-span window per rank when steps are not marked."""
    if trace.steps.height:
        return trace.steps.select("rank", "step", "start_ns", "end_ns")
    return trace.events.group_by("rank").agg(start_ns=pl.col("start_ns").min(),
                                            end_ns=pl.col("end_ns").max()) \
        .with_columns(step=pl.lit(0, dtype=pl.Int32)).select("rank", "step", "start_ns",
                                                             "end_ns").sort("rank")


NORMALIZE_KD = r"(?:\.kd| \[clone \.kd\])$"
NORMALIZE_CLONE = r"(?:[._]clone(?:[._]\d+)?)+$"


def normalize_kernel_expr(col: str = "name") -> pl.Expr:
    """The kernel name with only the suffixes that never tell two kernels apart stripped:
    the code-object ``.kd`` (or rocprofv3's `` [clone .kd]``) and XLA's ``.clone``/``.clone.N``.
    Numeric suffixes stay: ``input_transpose_fusion`` and ``input_transpose_fusion_1`` are
    different fusions of one program."""
    return pl.col(col).str.replace(NORMALIZE_KD, "").str.replace(NORMALIZE_CLONE, "")


def normalize_kernel(name: str) -> str:
    """``normalize_kernel_expr`` for one name."""
    return pl.select(pl.lit(name, dtype=pl.String).alias("name")).select(
        normalize_kernel_expr())["name"].item()


def program_key(ev: pl.DataFrame) -> pl.DataFrame:
    """A program's name that can be compared across runs: its module name, plus ``#k`` when
    the name repeats: the k-th program of that name to run (by its first kernel in ``ev``'s
    ``first_ns``, then program id). ``program_id`` itself is a per-compilation number (on TPU
    a fingerprint) and differs between runs; the order the programs ran in is the program's
    (an eager JAX loop runs its ``jit_matmul`` programs in one order on every backend)."""
    progs = ev.filter(pl.col("module").is_not_null()).group_by("module", "program_id").agg(
        pl.col("first_ns").min()).sort("module", "first_ns", "program_id", nulls_last=True)
    k = pl.int_range(1, pl.len() + 1).over("module")
    many = pl.len().over("module") > 1
    return progs.with_columns(program=pl.when(many & pl.col("program_id").is_not_null()).then(
        pl.col("module") + "#" + k.cast(pl.String)).otherwise(pl.col("module"))).select(
        "module", "program_id", "program")


def kernel_partial(trace: Trace) -> pl.DataFrame:
    """Per (category, module, program_id, op, normalized name): total ns and count over the
    trace's step windows (the whole span without steps), the first name in sort order, the
    op's JAX op (:mod:`tracelens.hlo.jax_ops`, null where the HLO does not say) and the first
    start of its program in the trace (``program_key``'s order: a window may start mid-loop).
    Exact integer sums: the parts of several hosts add up (:func:`kernels_of_partials`).
    Summed from the events' :func:`~tracelens.analyze.compute.kernel_table.kernel_table` (the one
    kernel aggregation ``summarize`` uses too): names are normalized per distinct name."""
    from tracelens.hlo.jax_ops import jax_op_table

    ev = clip_to_windows(trace.events, run_windows(trace)) if trace.steps.height else trace.events
    part = kernel_table(ev).with_columns(category=pl.col("category").cast(pl.String),
                                         key=normalize_kernel_expr()).group_by(
        "category", "module", "program_id", "op", "key").agg(
        name=pl.col("name").min(), ns=pl.col("sum_ns").sum(),
        count=pl.col("count").sum().cast(pl.Int64))
    first = trace.events.filter(pl.col("module").is_not_null()).group_by(
        "module", "program_id").agg(
        first_ns=pl.col("start_ns").min()).with_columns(pl.col("module").cast(
            part.schema["module"]))
    ops = jax_op_table(trace.modules, first).with_columns(
        pl.col(c).cast(part.schema[c]) for c in ("module", "op"))
    return part.join(first, on=["module", "program_id"], how="left", nulls_equal=True).join(
        ops, on=["module", "program_id", "op"], how="left", nulls_equal=True)


def kernels_of_partials(part: pl.DataFrame, n_windows: int) -> pl.DataFrame:
    """Per (category, program, op, normalized name): time and count per device-step, the
    first of its names in sort order and its JAX op, from :func:`kernel_partial` rows (of one
    trace or of several hosts concatenated). Rows sorted by those keys."""
    keys = ["category", "program", "op", "key"]
    return part.join(program_key(part), on=["module", "program_id"], how="left",
                     nulls_equal=True).group_by(keys).agg(
        name=pl.col("name").min(), jax_op=pl.col("jax_op").min(),
        ns_per_step=pl.col("ns").sum() / n_windows,
        count_per_step=pl.col("count").sum() / n_windows,
    ).sort(keys, nulls_last=True)


def kernel_frame(trace: Trace, n_windows: int) -> pl.DataFrame:
    """:func:`kernels_of_partials` of the trace's own :func:`kernel_partial`."""
    return kernels_of_partials(kernel_partial(trace), n_windows)
