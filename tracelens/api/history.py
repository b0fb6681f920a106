"""The facade's run history and classifier answers (``tracelens history ...``,
``tracelens explain``): functions of a store or a name, not of one trace, each checking its
arguments as the command does (:class:`~tracelens.core.errors.TraceInputError`,
:class:`~tracelens.core.errors.TraceUsageError`). The CLI calls them and renders what they
return."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from tracelens.core.errors import TraceInputError, TraceUsageError

if TYPE_CHECKING:
    from tracelens.classify.rules import Match
    from tracelens.results.history import HistoryCheck, HistoryShow, RunRecord

DEFAULT_WINDOW = 10  # tracelens.history.detect.DEFAULT_WINDOW (not imported: --help is light)
METRICS = ("step", "mfu", "component")


def parse_tags(values: "Mapping[str, str] | Sequence[str] | None") -> dict[str, str]:
    """Tags as a dict, from a dict or ``KEY=VALUE`` strings (``--tag``)."""
    if values is None:
        return {}
    if isinstance(values, Mapping):
        return {str(k): str(v) for k, v in values.items()}
    out: dict[str, str] = {}
    for v in values:
        key, eq, val = v.partition("=")
        if not eq or not key.strip():
            raise TraceUsageError(f"{v!r} is not KEY=VALUE", "--tag")
        if key.strip() in out and out[key.strip()] != val:
            raise TraceUsageError(f"tag {key.strip()!r} given twice", "--tag")
        out[key.strip()] = val
    return out


@dataclass(frozen=True)
class Recorded:
    """What :func:`history_record` did: the run's label in the store, whether it was added
    now (False: the same inputs were already recorded under ``label``), and the record
    (None when nothing was added)."""

    label: str
    added: bool
    record: RunRecord | None = None


def history_record(paths: Sequence[str | Path], store: str | Path, label: str | None = None,
                   tags: "Mapping[str, str] | Sequence[str] | None" = None,
                   recorded_at: str | None = None, *, step_marker: str | None = None,
                   rules: Any = None, workers: int | None = None,
                   scheduler: str | None = None) -> Recorded:
    """``tracelens history add``: record the run behind ``paths`` (one job) in ``store``
    (created with its first run); the same inputs are recorded once."""
    from tracelens.history.record import hash_inputs, now_utc, parse_time, record_job
    from tracelens.history.store import open_store
    from tracelens.api.inputs import check_regex, load_rule_files

    paths, store = [Path(p) for p in paths], Path(store)
    if not paths:
        raise TraceUsageError("history_record needs at least one path")
    tag_map = parse_tags(tags)
    check_regex(step_marker, "--step-marker")
    if recorded_at is not None:
        try:
            when = parse_time(recorded_at)
        except ValueError:
            raise TraceUsageError(f"{recorded_at!r} is not an ISO 8601 time",
                                  "--recorded-at") from None
    else:
        when = now_utc()
    rule_files = tuple(str(r) for r in ([rules] if isinstance(rules, (str, Path))
                                        else rules or ()))
    inputs, ident = hash_inputs(paths, step_marker, rule_files)
    if store.exists():  # a bad store fails here, before the analysis; a known run stops here
        with open_store(store, create=True) as s:
            known = s.find(ident)
        if known is not None:
            return Recorded(known, False)
    elif not store.parent.is_dir():
        raise TraceInputError(store, f"cannot create: folder {store.parent} does not exist")
    rec = record_job(paths, label or f"{paths[0].name}@{ident[:8]}", tag_map, when, inputs,
                     ident, step_marker, load_rule_files(rule_files), workers, scheduler)
    with open_store(store, create=True) as s:  # created only now, with a run to hold
        got, added = s.add(rec)
    return Recorded(got, added, rec if added else None)


def history_runs(store: str | Path, tags: "Mapping[str, str] | Sequence[str] | None" = None
                 ) -> list[RunRecord]:
    """``tracelens history list``: every recorded run (with all of ``tags``), in the order
    recorded."""
    from tracelens.history.detect import with_tags
    from tracelens.history.store import open_store

    tag_map = parse_tags(tags)
    with open_store(Path(store)) as s:
        runs = s.runs()
    return with_tags(runs, tag_map) if tag_map else runs


def _window(window: int, fail_above: float) -> None:
    if window < 1:
        raise TraceUsageError(f"{window} is not in the range x>=1", "--window")
    if fail_above < 0:
        raise TraceUsageError(f"{fail_above} is not in the range x>=0", "--fail-above")


def history_show(store: str | Path, tags: "Mapping[str, str] | Sequence[str] | None" = None,
                 metric: str = "step", window: int = DEFAULT_WINDOW, fail_above: float = 0.0
                 ) -> HistoryShow:
    """``tracelens history show``: the runs' trend per series, regressions marked (as
    :func:`history_check` finds them run by run)."""
    from tracelens.history.detect import flag_history, setup_notes
    from tracelens.results.history import HistoryShow, RunPoint

    if metric not in METRICS:
        raise TraceUsageError(f"{metric!r} is not one of {', '.join(METRICS)}", "--metric")
    _window(window, fail_above)
    runs = history_runs(store, tags)
    regs = flag_history(runs, window, fail_above)
    flagged = {g.label for g in regs}
    return HistoryShow(metric, tuple(RunPoint.of(r, r.label in flagged) for r in runs),
                       tuple(regs), setup_notes(runs))


def history_check(store: str | Path, tags: "Mapping[str, str] | Sequence[str] | None" = None,
                  baseline: str | None = None, window: int = DEFAULT_WINDOW,
                  fail_above: float = 0.0) -> HistoryCheck:
    """``tracelens history check``: whether the newest run of each series regressed (the CI
    gate: ``regressions`` non-empty); a store without runs to check is an input error."""
    from tracelens.history.detect import check as build

    _window(window, fail_above)
    tag_map = parse_tags(tags)
    runs = history_runs(store, tag_map)
    if not runs:  # a gate with nothing to check does not pass silently (a mistyped tag)
        raise TraceInputError(store, "no runs to check" + (" with the tags given (" + ", ".join(
            f"{k}={v}" for k, v in sorted(tag_map.items())) + ")" if tag_map else ""))
    if baseline is not None and baseline not in {r.label for r in runs}:
        raise TraceInputError(store, f"no run labelled {baseline!r}"
                              + (" with the tags given" if tag_map else ""))
    return build(runs, window, fail_above, baseline)


def explain(name: str, op: str | None = None, kind: str = "kernel",
            hlo_category: str | None = None, rules: Any = None) -> Match:
    """``tracelens explain``: which category ``name`` gets, the layer and rule that decided
    it (library rules, the words inside the name, then the launching ``op``; a TPU op's XLA
    ``hlo_category``), and why."""
    from tracelens.classify import TPU_SIGNAL, explain as explain_name
    from tracelens.api.inputs import load_rule_files

    if kind not in ("kernel", "memcpy", "memset"):
        raise TraceUsageError(f"{kind!r} is not one of kernel, memcpy, memset", "--kind")
    return explain_name(name, op=op, kind=kind, rules=load_rule_files(rules),
                        hlo=None if hlo_category is None else TPU_SIGNAL + hlo_category)


def history_export(store: str | Path, out: str | Path) -> list[Path]:
    """``tracelens history export``: the store as Parquet files (one per table) in ``out``
    (created); returns the files written."""
    from tracelens.history.export import export_parquet

    return export_parquet(history_runs(store), Path(out))
