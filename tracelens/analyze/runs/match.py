"""Whether two runs can be compared as the same work (``compare``, ``scaling``;
docs/compare.md#definitions):
the same hardware and the same program. Each difference is a :class:`~tracelens.core.model.Notice`
(stable code, its numbers as fields) that the commands list with their warnings.

Program: where both runs name their programs (XLA modules, HLO), the sets of programs with
device time, and (``compare``) where both carry a program's HLO, its fingerprint: the
instructions' opcodes and shapes, so two compilations of one program match and a changed
program (a new fusion, another shape) does not; and for every format the mix of work: the
share of each run's device time in kernels the other run never ran (matched as ``compare``
matches them: HLO op or ATen op, then normalized name) and, where both sides record ops (HLO
ops, ATen ops), in ops the other never ran. Two ranks or two steps of one job run the same
kernels; a different model, batch shape or library version does not.
"""

from __future__ import annotations

from typing import Protocol

import polars as pl

from tracelens.core.hlo_model import Module, Shape
from tracelens.core.model import Notice
from tracelens.results.summary import HardwareCount, hardware_text


class Run(Protocol):
    """What is compared of a run (a :class:`~tracelens.analyze.runs.scaling.RunProfile`)."""

    devices: int
    hardware: tuple[HardwareCount, ...]
    kernels: pl.DataFrame  # category, program, op, key, name, jax_op, ns_per_step, count_per_step
    fingerprints: dict[str, tuple[str, ...]]  # module name -> its HLO fingerprints
    signatures: dict[str, tuple[str, ...]]  # module name -> its parameter/result fingerprints


def _shape_text(shape: Shape) -> str:
    if shape.is_tuple:
        return "(" + ", ".join(_shape_text(t) for t in shape.tuple_shapes) + ")"
    return f"{shape.dtype}{list(shape.dims)}"


def _signature_items(m: Module) -> list[str]:
    """A program's signature: its entry's parameters in order and its result, as shapes."""
    entry = m.computations.get(m.entry)
    if entry is None:
        return []
    params = sorted((i.parameter_number, _shape_text(i.shape))
                    for i in entry.instructions.values() if i.opcode == "parameter")
    root = entry.instructions.get(entry.root)
    return [t for _, t in params] + ["-> " + (_shape_text(root.shape) if root else "?")]


def fingerprints(modules: pl.DataFrame, signature: bool = False) -> dict[str, tuple[str, ...]]:
    """Module name -> the sorted distinct fingerprints of its HLO in ``trace.modules`` (one per
    distinct program of that name): sha256 (12 hex digits) of its instructions' opcodes and
    shapes, sorted. Names, ids and program ids are per compilation and left out; a module
    that does not decode has none. ``signature``: of its entry's parameter and result shapes
    only, which every backend compiling one JAX function with one set of arguments shares
    (the instructions are the backend's own: a TPU's and a GPU's HLO of one program differ)."""
    import hashlib

    from tracelens.hlo.index import decoded_module

    out: dict[str, set[str]] = {}
    if not modules.height:
        return {}
    rows = modules.select("module", "program_id", "hlo_proto").unique(
        ["module", "hlo_proto"]).sort("module", "program_id", nulls_last=True)
    for name, pid, blob in rows.iter_rows():
        if name is None or blob is None:
            continue
        m = decoded_module(blob, pid if pid is not None else -1)
        if isinstance(m, Exception):
            continue
        items = _signature_items(m) if signature else sorted(
            f"{i.opcode} {_shape_text(i.shape)}"
            for c in m.computations.values() for i in c.instructions.values())
        digest = hashlib.sha256("\n".join(items).encode()).hexdigest()[:12]
        out.setdefault(str(name), set()).add(digest)
    return {k: tuple(sorted(v)) for k, v in sorted(out.items())}


PROGRAM_MIN_UNMATCHED = 0.10
"""A run spending more than this share of its device time in kernels (or ops) the other run
never ran ran different work: warned."""
OPS_MIN = 0.5
"""The op mix is compared where ops cover at least this share of each run's device time (a
CUDA/HIP graph replay's kernels carry no ATen op: its few that do say nothing of the mix)."""
SHOWN = 3  # names listed in a warning
NAME_CHARS = 60  # each cut to this many characters (C++ kernel names run to kilobytes)


def hardware_notices(a: Run, b: Run, counts: bool = True) -> list[Notice]:
    """What differs between the two runs' hardware: vendor, else product (or arch), and
    (``counts``) the number of devices with activity; a side whose devices are unknown
    cannot be checked."""
    out = []
    sides = f"base: {hardware_text(a.hardware)}, new: {hardware_text(b.hardware)}"
    unknown = [s for s, p in (("base", a), ("new", b))
               if not p.hardware or any(h.kind is None for h in p.hardware)]
    kinds = [{h.kind for h in p.hardware if h.kind} for p in (a, b)]
    if unknown:
        out.append(Notice.of(
            "runs.hardware_unknown", "the hardware of {sides_unknown} is not known ({sides}): "
            "whether both runs are on the same hardware cannot be checked",
            sides_unknown=" and ".join(unknown), sides=sides))
    if _vendors_differ(a, b):
        out.append(Notice.of(
            "runs.vendor", "the runs are on different vendors' hardware ({sides}): kernel "
            "names and libraries differ, so kernels match by the JAX op they ran for (where "
            "both traces carry their programs' HLO) more than by name, and the step-time "
            "change includes the hardware's", sides=sides))
    elif all(kinds) and kinds[0] != kinds[1]:
        out.append(Notice.of("runs.hardware", "the runs are on different hardware ({sides}): "
                             "the step-time change includes the hardware's", sides=sides))
    if counts and a.devices != b.devices:
        out.append(Notice.of(
            "runs.device_count", "the runs have different device counts (base: {base}, new: "
            "{new} with activity): components are averaged over devices, and a change of "
            "parallelism changes them too (`tracelens scaling` diagnoses scaling)",
            base=a.devices, new=b.devices))
    return out


def _vendors_differ(a: Run, b: Run) -> bool:
    vendors = [{h.vendor for h in p.hardware if h.vendor} for p in (a, b)]
    return bool(all(vendors) and vendors[0] != vendors[1])


def _changed(names: set[str], fa: dict[str, tuple[str, ...]],
             fb: dict[str, tuple[str, ...]]) -> list[str]:
    """The programs of ``names`` both sides fingerprint whose fingerprints differ."""
    return sorted(n for n in names if n in fa and n in fb and fa[n] != fb[n])


def _programs(p: Run) -> set[str]:
    """The names of the programs (XLA modules) its kernels ran in, with device time."""
    k = p.kernels
    if not k.height or "program" not in k.columns:
        return set()
    return set(k.filter(pl.col("ns_per_step") > 0)["program"].drop_nulls().to_list())


def _names(values: list[str]) -> str:
    """The first :data:`SHOWN` names, each cut to :data:`NAME_CHARS`, and how many more."""
    more = f", ... {len(values) - SHOWN} more" if len(values) > SHOWN else ""
    cut = [v if len(v) <= NAME_CHARS else v[:NAME_CHARS - 1] + "…" for v in values[:SHOWN]]
    return ", ".join(cut) + more


def _only_share(mine: pl.DataFrame, theirs: pl.DataFrame, key: str
                ) -> tuple[float, list[str]]:
    """The share of ``mine``'s kernel time whose ``key`` ``theirs`` never has, and those
    keys, costliest first."""
    total = float(mine["ns_per_step"].sum())
    if not total:
        return 0.0, []
    only = mine.join(theirs.select(key).unique(), on=key, how="anti").group_by(key).agg(
        pl.col("ns_per_step").sum()).sort(["ns_per_step", key], descending=[True, False])
    return float(only["ns_per_step"].sum()) / total, [str(v) for v in only[key]]


def program_notices(a: Run, b: Run, only_base: pl.DataFrame | None = None,
                    only_new: pl.DataFrame | None = None, hlo: bool = False) -> list[Notice]:
    """What says the two runs ran different programs (module doc). ``only_base``/``only_new``:
    :func:`match_kernels`' unmatched rows when the caller has them; ``hlo``: compare the HLO
    fingerprints of the programs both ran (``compare``; a scaling pair's programs are
    partitioned for their device counts, so they differ by design)."""
    out = []
    pa, pb = _programs(a), _programs(b)
    if pa and pb and pa != pb:
        out.append(Notice.of(
            "runs.programs", "the runs ran different XLA programs (only in base: {base}; only "
            "in new: {new}): the step-time change includes the programs'",
            base=_names(sorted(pa - pb)) or "-", new=_names(sorted(pb - pa)) or "-"))
    if hlo and _vendors_differ(a, b):  # each backend's own HLO: compare what JAX gave it
        changed = _changed(pa & pb, a.signatures, b.signatures)
        if changed:
            out.append(Notice.of(
                "runs.signature", "the runs ran programs of one name with other parameter or "
                "result shapes ({names}): the step-time change includes the programs'",
                names=_names(changed)))
    elif hlo and (changed := _changed(pa & pb, a.fingerprints, b.fingerprints)):
        out.append(Notice.of(
            "runs.hlo", "the runs ran different HLO under the same program name ({names}: "
            "other instructions or shapes): the step-time change includes the programs'",
            names=_names(changed)))
    if only_base is None or only_new is None:
        _, only_base, only_new = match_kernels(a.kernels, b.kernels)
    shares = []
    for side, p, only in (("base", a, only_base), ("new", b, only_new)):
        total = float(p.kernels["ns_per_step"].sum()) if p.kernels.height else 0.0
        ns = float(only["base_ns_per_step" if side == "base" else "new_ns_per_step"].sum()) \
            if only.height else 0.0
        shares.append((side, ns / total if total else 0.0, only))
    if any(s > PROGRAM_MIN_UNMATCHED for _, s, _ in shares):
        (_, sa, oa), (_, sb, ob) = shares
        out.append(Notice.of(
            "runs.kernel_mix", "the runs ran different kernels: {base_pct}% of base's device "
            "time is in kernels new never ran ({base}), {new_pct}% of new's in kernels base "
            "never ran ({new}): a different program, shapes or libraries; the step-time "
            "change includes theirs",
            base_pct=round(100 * sa), base=_names(_costliest(oa, "base")) or "-",
            new_pct=round(100 * sb), new=_names(_costliest(ob, "new")) or "-"))
    for key, what, one in (("jax_op", "JAX ops", "a JAX op"), ("op", "ops", "an op")):
        # JAX ops outlive compilations: another backend's HLO op names are its own
        wa, wb = (p.kernels.filter(pl.col(key).is_not_null()) if p.kernels.height
                  else p.kernels for p in (a, b))
        if _share_of(wa, a) < OPS_MIN or _share_of(wb, b) < OPS_MIN:
            continue
        sa, na = _only_share(wa, wb, key)
        sb, nb = _only_share(wb, wa, key)
        if max(sa, sb) > PROGRAM_MIN_UNMATCHED:
            out.append(Notice.of(
                "runs.op_mix", "the runs ran different {what}: {base_pct}% of base's device "
                "time (with {one}) is in {what} new never ran ({base}), {new_pct}% of new's in "
                "{what} base never ran ({new})", what=what, one=one, base_pct=round(100 * sa),
                base=_names(na) or "-", new_pct=round(100 * sb), new=_names(nb) or "-"))
        break
    return out


_SIDE_COLS = ("program", "op", "name", "jax_op", "ns_per_step", "count_per_step")


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
            *[single(c) for c in ("program", "op", "jax_op") if p + c not in by],
            pl.col(p + "name").min(),
            pl.col(p + "ns_per_step").sum(), pl.col(p + "count_per_step").sum(),
            pl.col("key").n_unique().alias(p + "kernels"))


def _together(a: pl.DataFrame, b: pl.DataFrame, col: str
              ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The kernels left of one (category, program, ``col``) on each side, taken together and
    matched (``match`` = ``col``), and each side less them. Rows without ``col`` take no
    part."""
    ka, kb = ["category", "base_program", f"base_{col}"], ["category", "new_program", f"new_{col}"]
    ga = _grouped(a.filter(pl.col(ka[2]).is_not_null()), "base", ka[1:])
    gb = _grouped(b.filter(pl.col(kb[2]).is_not_null()), "new", kb[1:])
    got = ga.join(gb, left_on=ka, right_on=kb, coalesce=False, nulls_equal=True).drop(
        "category_right", strict=False).with_columns(match=pl.lit(col))
    return (got, a.join(got.select(*ka), on=ka, how="anti", nulls_equal=True),
            b.join(got.select(*kb), on=kb, how="anti", nulls_equal=True))


def match_kernels(base: pl.DataFrame, new: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame,
                                                                     pl.DataFrame]:
    """(matched, only_base, only_new) of two ``kernel_frame``s, one to one, in the order
    :mod:`tracelens.analyze.runs.compare`'s docstring gives (``compare`` and the kernel-mix
    warning match kernels alike).

    ``matched`` has ``category``, ``match`` ("op", "jax_op" or "name") and every ``base_``/``new_``
    column; the others have their side's columns.
    """
    a, b = _side(base, "base"), _side(new, "new")
    has_a, has_b = pl.col("base_op").is_not_null(), pl.col("new_op").is_not_null()
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
    by_op, a, b = _together(a, b, "op")
    # 1c. same program and JAX op (another compilation of it: other HLO op names, another
    # backend's kernels): what is left of it on each side, together
    by_jax, a, b = _together(a, b, "jax_op")
    # 2. normalized name, per category
    na, nb = _grouped(a, "base", ["key"]), _grouped(b, "new", ["key"])
    by_name = na.join(nb, on=["category", "key"]).with_columns(match=pl.lit("name"))
    only_a = na.join(nb.select("category", "key"), on=["category", "key"], how="anti")
    only_b = nb.join(na.select("category", "key"), on=["category", "key"], how="anti")
    cols = ["category", "match", *[f"{s}_{c}" for s in ("base", "new")
                                   for c in (*_SIDE_COLS, "kernels")]]
    matched = pl.concat([by_key.select(cols), by_op.select(cols), by_jax.select(cols),
                         by_name.select(cols)],
                        how="vertical_relaxed").sort(
        "category", "match", "base_program", "base_op", "base_name", nulls_last=True)
    order = ["category", "key"]
    return matched, only_a.sort(order), only_b.sort(order)


def _share_of(part: pl.DataFrame, p: Run) -> float:
    """``part``'s share of the run's kernel time (0 without any)."""
    total = float(p.kernels["ns_per_step"].sum()) if p.kernels.height else 0.0
    return float(part["ns_per_step"].sum()) / total if total and part.height else 0.0


def _costliest(only: pl.DataFrame, side: str) -> list[str]:
    if not only.height:
        return []
    ns, name = f"{side}_ns_per_step", f"{side}_name"
    return [str(v) for v in only.sort([ns, name], descending=[True, False])[name]]
