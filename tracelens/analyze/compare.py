"""``tracelens compare BASE NEW``: where a change made training slower (or faster).

Both runs are reduced to their profile (``tracelens.analyze.scaling.profile``): the median step
averaged over devices, split into components that add up to it. Kernels are matched one to one,
only within one category, in this order (README "compare"):

1. by HLO op, where both sides have one, in the same program (or both without a program
   name): the same (program, op, normalized name),
   then the same (program, op) with the kernels of that op left on each side taken together
   (another Tensile tile for the same GEMM; an attention op whose kernels are named per arch);
2. by normalized name (``.kd`` and clone suffixes stripped, numeric suffixes kept), every
   kernel of that name left on a side counted together;
3. the rest is unmatched (``only_base`` / ``only_new``).

Before any of that, each side must have something to compare (a device with activity and a
step that lasts): else it is refused, naming the file. The result says what was compared: each
side's hardware, a warning where the two differ (vendor, product, device count), and every
warning of each side's readers and loader, prefixed ``base:``/``new:``.

Every output list has a total order, ties broken by name, so the JSON is byte-identical from
run to run.
"""

from __future__ import annotations


import polars as pl

from tracelens.analyze.scaling import RunProfile, hardware_difference, scaling_transition
from tracelens.errors import TraceInputError
from tracelens.results.encode import JSONValue, encode
from tracelens.results.filters import ActiveFilters
from tracelens.results.runs import (ComparedRun, Comparison, ComponentChange, KernelChange,
                                    KernelOnly, Matching)

_SIDE_COLS = ("program", "op", "name", "ns_per_step", "count_per_step")


def _side(df: pl.DataFrame, side: str) -> pl.DataFrame:
    return df.select("category", "key", *[pl.col(c).alias(f"{side}_{c}") for c in _SIDE_COLS])


def _grouped(df: pl.DataFrame, side: str, by: list[str]) -> pl.DataFrame:
    """A side's remaining kernels, one row per category and ``by``: times and counts summed,
    the first name in sort order, how many kernels (normalized names) were put together, and
    program and op when they are the same for all of them (else null)."""
    p = f"{side}_"

    def single(c: str) -> pl.Expr:
        return pl.when(pl.col(p + c).n_unique() == 1).then(pl.col(p + c).first())

    return df.sort("category", *by, p + "name", p + "program", p + "op", nulls_last=True) \
        .group_by("category", *by, maintain_order=True).agg(
            *[single(c) for c in ("program", "op") if p + c not in by], pl.col(p + "name").min(),
            pl.col(p + "ns_per_step").sum(), pl.col(p + "count_per_step").sum(),
            pl.col("key").n_unique().alias(p + "kernels"))


def match_kernels(base: pl.DataFrame, new: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame,
                                                                     pl.DataFrame]:
    """(matched, only_base, only_new) of two ``kernel_frame``s, one to one (module docstring).

    ``matched`` has ``category``, ``match`` ("op" or "name") and every ``base_``/``new_``
    column; the others have their side's columns.
    """
    a, b = _side(base, "base"), _side(new, "new")
    has_a, has_b = pl.col("base_op").is_not_null(), pl.col("new_op").is_not_null()
    op_keys = ["category", "base_program", "base_op"]
    # 1a. same program, op and normalized name
    by_key = a.filter(has_a).join(
        b.filter(has_b), left_on=["category", "base_program", "base_op", "key"],
        right_on=["category", "new_program", "new_op", "key"], coalesce=False,
        nulls_equal=True)
    by_key = by_key.drop("key_right").with_columns(match=pl.lit("op"), base_kernels=pl.lit(1),
                                                   new_kernels=pl.lit(1))
    a = a.join(by_key.select("category", "base_program", "base_op", "key"),
               on=["category", "base_program", "base_op", "key"], how="anti", nulls_equal=True)
    b = b.join(by_key.select("category", "new_program", "new_op", pl.col("key")),
               on=["category", "new_program", "new_op", "key"], how="anti", nulls_equal=True)
    # 1b. same program and op: what is left of the op on each side, together
    ga, gb = _grouped(a.filter(has_a), "base", ["base_program", "base_op"]), \
        _grouped(b.filter(has_b), "new", ["new_program", "new_op"])
    by_op = ga.join(gb, left_on=op_keys, right_on=["category", "new_program", "new_op"],
                    coalesce=False, nulls_equal=True).drop("category_right", strict=False) \
        .with_columns(match=pl.lit("op"))
    a = a.join(by_op.select(*op_keys), on=op_keys, how="anti", nulls_equal=True)
    b = b.join(by_op.select("category", "new_program", "new_op"),
               on=["category", "new_program", "new_op"], how="anti", nulls_equal=True)
    # 2. normalized name, per category
    na, nb = _grouped(a, "base", ["key"]), _grouped(b, "new", ["key"])
    by_name = na.join(nb, on=["category", "key"]).with_columns(match=pl.lit("name"))
    only_a = na.join(nb.select("category", "key"), on=["category", "key"], how="anti")
    only_b = nb.join(na.select("category", "key"), on=["category", "key"], how="anti")
    cols = ["category", "match", *[f"{s}_{c}" for s in ("base", "new")
                                   for c in (*_SIDE_COLS, "kernels")]]
    matched = pl.concat([by_key.select(cols), by_op.select(cols), by_name.select(cols)],
                        how="vertical_relaxed").sort(
        "category", "match", "base_program", "base_op", "base_name", nulls_last=True)
    order = ["category", "key"]
    return matched, only_a.sort(order), only_b.sort(order)


def _kernel_table(a: RunProfile, b: RunProfile, top: int) -> tuple[
        tuple[KernelChange, ...], tuple[KernelOnly, ...], tuple[KernelOnly, ...], Matching]:
    """The ``top`` largest kernel changes, the ``top`` costliest kernels of each side found
    only there, and how the matching went."""
    matched, only_a, only_b = match_kernels(a.kernels, b.kernels)
    matched = matched.with_columns(delta_ns=pl.col("new_ns_per_step")
                                   - pl.col("base_ns_per_step"))
    changed = matched.filter((pl.col("delta_ns") != 0)
                             | (pl.col("new_count_per_step") != pl.col("base_count_per_step")))
    ident = ["category", "new_name", "base_name", "new_op", "base_op", "new_program",
             "base_program", "match"]
    changed = changed.sort([pl.col("delta_ns").abs(), *ident],
                           descending=[True] + [False] * len(ident), nulls_last=True)

    def rows(df: pl.DataFrame, side: str) -> tuple[KernelOnly, ...]:
        p = f"{side}_"
        df = df.sort([p + "ns_per_step", "category", p + "name", p + "op", p + "program"],
                     descending=[True, False, False, False, False], nulls_last=True)
        return tuple(KernelOnly(
            name=r[p + "name"], category=r["category"], op=r[p + "op"],
            program=r[p + "program"], ns_per_step=r[p + "ns_per_step"],
            count_per_step=r[p + "count_per_step"], kernels=r[p + "kernels"])
            for r in df.head(top).iter_rows(named=True))

    by = matched.group_by("match").len().sort("match")
    kernels = tuple(KernelChange(
        name=r["new_name"], base_name=r["base_name"], category=r["category"],
        match=r["match"], op=r["new_op"], base_op=r["base_op"], program=r["new_program"],
        base_program=r["base_program"], base_ns=r["base_ns_per_step"],
        new_ns=r["new_ns_per_step"], delta_ns=r["delta_ns"],
        base_count=r["base_count_per_step"], new_count=r["new_count_per_step"],
        base_kernels=r["base_kernels"], new_kernels=r["new_kernels"])
        for r in changed.head(top).iter_rows(named=True))
    matching = Matching(by_op=int(by.filter(pl.col("match") == "op")["len"].sum()),
                        by_name=int(by.filter(pl.col("match") == "name")["len"].sum()),
                        changed=changed.height, only_base=only_a.height,
                        only_new=only_b.height)
    return kernels, rows(only_a, "base"), rows(only_b, "new"), matching


def check_comparable(p: RunProfile, filters: ActiveFilters | None = None) -> None:
    """Refuse (exit 2, naming the file) a side with nothing to compare: no device with
    activity, or no device time (its activities in the step windows last 0 ns in all).
    Compared, it would read as "step time did not change (0.000 ms)" or as a step of pure
    idle time; ``filters``: the active ones, said when they are what left nothing."""
    busy = float(p.kernels["ns_per_step"].sum()) if p.kernels.height else 0.0
    if p.devices and p.step_ns > 0 and busy > 0:
        return
    what = ("no device with activity (0 analysable devices: no kernel, copy or collective)"
            if not p.devices else "no device time (its device activities last 0 ns in all)")
    after = f" after the filters {_filter_text(filters)}" if filters else ""
    raise TraceInputError(p.path, f"nothing to compare: {what}{after}")


def _filter_text(filters: ActiveFilters) -> str:
    """``(category: gemm, kernel: nccl)``: the active filters as the JSON names them."""
    return "(" + ", ".join(
        f"{k}: {','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
        for k, v in sorted(filters.items())) + ")"


def hardware_warnings(a: RunProfile, b: RunProfile) -> list[str]:
    """What differs between the two runs' hardware (:func:`hardware_difference`), and the
    number of devices with activity."""
    out = hardware_difference(a, b)
    if a.devices != b.devices:
        out.append(f"the runs have different device counts (base: {a.devices}, new: "
                   f"{b.devices} with activity): components are averaged over devices, and "
                   "a change of parallelism changes them too (`tracelens scaling` diagnoses "
                   "scaling)")
    return out


def comparison(a: RunProfile, b: RunProfile, top: int = 15) -> Comparison:
    """Run b against run a: step time, components, collectives and kernels (module doc)."""
    check_comparable(a)
    check_comparable(b)
    t = scaling_transition(a, b)
    delta_pct = 100.0 * (b.step_ns - a.step_ns) / a.step_ns if a.step_ns else None
    comps = sorted(set(a.components) | set(b.components))
    rows = [ComponentChange(component=c, base_ns=a.components.get(c, 0.0),
                            new_ns=b.components.get(c, 0.0),
                            delta_ns=b.components.get(c, 0.0) - a.components.get(c, 0.0))
            for c in comps]
    kernels, only_base, only_new, matching = _kernel_table(a, b, top)
    warnings = (*hardware_warnings(a, b), *[f"base: {w}" for w in a.warnings],
                *[f"new: {w}" for w in b.warnings])
    return Comparison(
        base=ComparedRun(path=a.path, devices=a.devices, steps=a.steps, step_ns=a.step_ns,
                         hardware=a.hardware),
        new=ComparedRun(path=b.path, devices=b.devices, steps=b.steps, step_ns=b.step_ns,
                        hardware=b.hardware),
        warnings=warnings,
        delta_ns=b.step_ns - a.step_ns, delta_pct=delta_pct,
        components=tuple(sorted(rows, key=lambda r: (-abs(r.delta_ns), r.component))),
        busbw=t.busbw, arrival_skew_ns=t.arrival_skew_ns, kernels=kernels,
        only_base=only_base, only_new=only_new, matching=matching, verdict=t.verdict)


def compare(a: RunProfile, b: RunProfile, top: int = 15) -> JSONValue:
    """The JSON of :func:`comparison` (README "compare")."""
    return encode(comparison(a, b, top))
