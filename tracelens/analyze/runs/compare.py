"""``tracelens compare BASE NEW``: where a change made training slower (or faster).

Both runs are reduced to their profile (``tracelens.analyze.runs.scaling.profile``): the median step
averaged over devices, split into components that add up to it. Kernels are matched one to one,
only within one category, in this order (README "compare"):

1. by HLO op, where both sides have one, in the same program (or both without a program
   name): the same (program, op, normalized name),
   then the same (program, op) with the kernels of that op left on each side taken together
   (another Tensile tile for the same GEMM; an attention op whose kernels are named per arch),
   then the same (program, JAX op) with what is left of that JAX op on each side taken
   together (:mod:`tracelens.hlo.jax_ops`: another compilation of one JAX program, on other
   hardware too: a TPU's ``fusion`` and a GPU's ``custom-call.1`` for one ``dot_general``);
2. by normalized name (``.kd`` and clone suffixes stripped, numeric suffixes kept), every
   kernel of that name left on a side counted together;
3. the rest is unmatched (``only_base`` / ``only_new``).

Before any of that, each side must have something to compare (a device with activity and a
step that lasts): else it is refused, naming the file. The result says what was compared: each
side's hardware, a warning where the two differ in hardware (vendor, product, device count) or
program (XLA module names, the kernel and op mix: :mod:`tracelens.analyze.runs.match`), a
warning where the noise floor is unknown, and every warning of each side's readers and
loader, prefixed ``base:``/``new:``. Components move both ways: each one's share is of the
gross change, and a change within the runs' step-to-step noise is said to be so, not
decomposed (:func:`tracelens.analyze.runs.scaling.scaling_transition`).

Every output list has a total order, ties broken by name, so the JSON is byte-identical from
run to run.
"""

from __future__ import annotations


import polars as pl

from tracelens.analyze.runs.match import match_kernels
from tracelens.analyze.runs.scaling import RunProfile, noise_warnings, scaling_transition
from tracelens.core.errors import TraceInputError
from tracelens.results.encode import JSONValue, encode
from tracelens.results.filters import ActiveFilters
from tracelens.results.runs import (ComparedRun, Comparison, ComponentChange, KernelChange,
                                    KernelOnly, Matching)

def _kernel_table(a: RunProfile, b: RunProfile, top: int) -> tuple[
        tuple[KernelChange, ...], tuple[KernelOnly, ...], tuple[KernelOnly, ...], Matching,
        tuple[pl.DataFrame, pl.DataFrame]]:
    """The ``top`` largest kernel changes, the ``top`` costliest kernels of each side found
    only there, how the matching went, and every unmatched row of each side."""
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
        base_kernels=r["base_kernels"], new_kernels=r["new_kernels"],
        jax_op=r["new_jax_op"] if r["new_jax_op"] == r["base_jax_op"] else None)
        for r in changed.head(top).iter_rows(named=True))
    matching = Matching(by_op=int(by.filter(pl.col("match") == "op")["len"].sum()),
                        by_jax_op=int(by.filter(pl.col("match") == "jax_op")["len"].sum()),
                        by_name=int(by.filter(pl.col("match") == "name")["len"].sum()),
                        changed=changed.height, only_base=only_a.height,
                        only_new=only_b.height)
    return kernels, rows(only_a, "base"), rows(only_b, "new"), matching, (only_a, only_b)


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
    """What differs between the two runs' hardware
    (:func:`~tracelens.analyze.runs.match.hardware_notices`), as text."""
    from tracelens.analyze.runs.match import hardware_notices

    return [n.text for n in hardware_notices(a, b)]


def comparison(a: RunProfile, b: RunProfile, top: int = 15) -> Comparison:
    """Run b against run a: step time, components, collectives and kernels (module doc)."""
    from tracelens.analyze.runs.match import hardware_notices, program_notices

    check_comparable(a)
    check_comparable(b)
    t = scaling_transition(a, b)
    delta_pct = 100.0 * (b.step_ns - a.step_ns) / a.step_ns if a.step_ns else None
    share = {c.component: c.share for c in t.causes}
    comps = sorted(set(a.components) | set(b.components))
    rows = [ComponentChange(component=c, base_ns=a.components.get(c, 0.0),
                            new_ns=b.components.get(c, 0.0),
                            delta_ns=b.components.get(c, 0.0) - a.components.get(c, 0.0),
                            share=share.get(c))
            for c in comps]
    kernels, only_base, only_new, matching, unmatched = _kernel_table(a, b, top)
    notices = [*hardware_notices(a, b), *program_notices(a, b, *unmatched, hlo=True)]
    warnings = (*[n.text for n in notices], *noise_warnings(t.noise),
                *[f"base: {w}" for w in a.warnings], *[f"new: {w}" for w in b.warnings])
    return Comparison(
        base=ComparedRun(path=a.path, devices=a.devices, steps=a.steps, step_ns=a.step_ns,
                         median_se_ns=t.noise.se_ns[0], hardware=a.hardware),
        new=ComparedRun(path=b.path, devices=b.devices, steps=b.steps, step_ns=b.step_ns,
                        median_se_ns=t.noise.se_ns[1], hardware=b.hardware),
        warnings=warnings,
        delta_ns=b.step_ns - a.step_ns, delta_pct=delta_pct, gross_ns=t.gross_ns,
        noise=t.noise,
        components=tuple(sorted(rows, key=lambda r: (-abs(r.delta_ns), r.component))),
        busbw=t.busbw, arrival_skew_ns=t.arrival_skew_ns, kernels=kernels,
        only_base=only_base, only_new=only_new, matching=matching, verdict=t.verdict)


def compare(a: RunProfile, b: RunProfile, top: int = 15) -> JSONValue:
    """The JSON of :func:`comparison` (README "compare")."""
    return encode(comparison(a, b, top))
