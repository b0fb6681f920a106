"""``tracelens history``: record runs in a store and find regressions across them (issue 29).

``add`` records runs, ``list`` and ``show`` read them back, ``check`` is the CI gate (exit 1
when the newest run of a series regressed), ``export`` writes Parquet. A store that cannot be
read is exit 2 with one line, and left as it is (:mod:`tracelens.history.store`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import click

from tracelens.cli_common import (common_options, engine_options, format_option, guarded,
                                  html_option, load_rule_files, print_result,
                                  step_marker_option)
from tracelens.errors import TraceInputError

if TYPE_CHECKING:
    from reports.scaling import Tables
    from tracelens.results.history import RunRecord

DEFAULT_WINDOW = 10  # tracelens.history.detect.DEFAULT_WINDOW (not imported: --help is light)


def _tag(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
         ) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        key, eq, val = v.partition("=")
        if not eq or not key.strip():
            raise click.BadParameter(f"{v!r} is not KEY=VALUE")
        if key.strip() in out and out[key.strip()] != val:
            raise click.BadParameter(f"tag {key.strip()!r} given twice")
        out[key.strip()] = val
    return out


store_option = click.option("--store", required=True, type=click.Path(path_type=Path),
                            help="The run store (an SQLite file; `add` creates it).")
tag_option = click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE", callback=_tag,
                          help="A tag (repeatable).")
window_option = click.option("--window", type=click.IntRange(min=1), default=DEFAULT_WINDOW,
                             show_default=True, metavar="N",
                             help="Compare the newest run with the N runs before it.")
fail_option = click.option("--fail-above", type=click.FloatRange(min=0), default=0.0,
                           show_default=True, metavar="PCT",
                           help="A regression must also exceed PCT percent of the baseline "
                                "step.")


@click.group()
def history() -> None:
    """Run history: record runs, find regressions across them (CI: `history check`)."""


@history.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@store_option
@click.option("--label", default=None,
              help="The run's name (default: the first input's name and its hash).")
@tag_option
@click.option("--recorded-at", default=None, metavar="ISO8601",
              help="When the run happened (default: now), to record old runs in order.")
@step_marker_option
@engine_options
@common_options
@guarded
def add(paths: tuple[Path, ...], store: Path, label: str | None, tags: dict[str, str],
        recorded_at: str | None, step_marker: str | None, workers: int | None,
        scheduler: str | None, rules_files: tuple[str, ...], quiet: bool,
        debug: bool) -> None:
    """Record the run behind PATH... (one job) in the store."""
    from tracelens.history.record import hash_inputs, now_utc, parse_time, record_job
    from tracelens.history.store import open_store

    if recorded_at is not None:
        try:
            when = parse_time(recorded_at)
        except ValueError:
            raise click.BadParameter(f"{recorded_at!r} is not an ISO 8601 time",
                                     param_hint="--recorded-at") from None
    else:
        when = now_utc()
    inputs, ident = hash_inputs(paths, step_marker, rules_files)
    if store.exists():  # a bad store fails here, before the analysis; a known run stops here
        with open_store(store, create=True) as s:
            known = s.find(ident)
        if known is not None:
            click.echo(f"already recorded as {known} (same inputs); nothing added", err=True)
            return
    elif not store.parent.is_dir():
        raise TraceInputError(store, f"cannot create: folder {store.parent} does not exist")
    rec = record_job(paths, label or f"{paths[0].name}@{ident[:8]}", tags, when, inputs, ident,
                     step_marker, load_rule_files(rules_files), workers, scheduler)
    with open_store(store, create=True) as s:  # created only now, with a run to hold
        got, added = s.add(rec)
    if not added:
        click.echo(f"already recorded as {got} (same inputs); nothing added", err=True)
        return
    click.echo(f"recorded {got}: step {rec.step_ns / 1e6:,.3f} ms, series {rec.series}")


def _runs(store: Path, tags: dict[str, str] | None = None) -> list[RunRecord]:
    from tracelens.history.detect import with_tags
    from tracelens.history.store import open_store

    with open_store(store) as s:
        runs = s.runs()
    return with_tags(runs, tags) if tags else runs


def _print(fmt: str, result: object, tables: Callable[[], Tables],
           csv: Callable[[], tuple[list[dict[str, object]], list[str]]], title: str) -> None:
    from tracelens.results.encode import to_json
    from reports import scaling as render

    def as_csv() -> str:
        rows, cols = csv()
        return render.render_csv(rows, cols)

    print_result(fmt, lambda: to_json(result), as_csv,
                 lambda: render.render_markdown(title, tables()),
                 lambda console: render.render_table(tables(), console))


@history.command(name="list")
@store_option
@tag_option
@format_option
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@guarded
def list_runs(store: Path, tags: dict[str, str], fmt: str, debug: bool) -> None:
    """Every recorded run, in the order recorded."""
    from reports import history as render
    from tracelens.results.history import RunPoint

    runs = _runs(store, tags)
    _print(fmt, tuple(runs), lambda: render.list_tables(runs),
           lambda: render.csv_rows([RunPoint.of(r) for r in runs]), "tracelens history list")


@history.command()
@store_option
@tag_option
@click.option("--metric", type=click.Choice(["step", "mfu", "component"]), default="step",
              show_default=True, help="What the table and the chart show.")
@window_option
@fail_option
@format_option
@html_option
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@guarded
def show(store: Path, tags: dict[str, str], metric: str, window: int, fail_above: float,
         fmt: str, html: Path | None, debug: bool) -> None:
    """The runs' trend per series, regressions marked (as `check` finds them run by run)."""
    from reports import history as render
    from tracelens.history.detect import flag_history, setup_notes
    from tracelens.results.history import HistoryShow, RunPoint

    runs = _runs(store, tags)
    regs = flag_history(runs, window, fail_above)
    flagged = {g.label for g in regs}
    res = HistoryShow(metric, tuple(RunPoint.of(r, r.label in flagged) for r in runs),
                      tuple(regs), setup_notes(runs))
    if html is not None:
        try:
            html.write_text(render.render_html(res, str(store)), encoding="utf-8")
        except OSError as exc:
            raise TraceInputError(html, f"cannot write the HTML file: {exc.strerror or exc}") \
                from None
    _print(fmt, res, lambda: render.show_tables(res), lambda: render.csv_rows(res.runs),
           "tracelens history show")


@history.command()
@store_option
@tag_option
@click.option("--baseline", default=None, metavar="LABEL",
              help="Compare the newest run of each series with this run (instead of the "
                   "window's median run).")
@window_option
@fail_option
@format_option
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@guarded
def check(store: Path, tags: dict[str, str], baseline: str | None, window: int,
          fail_above: float, fmt: str, debug: bool) -> None:
    """Exit 1 when the newest run of a series regressed (for CI)."""
    from reports import history as render
    from tracelens.history.detect import check as build

    runs = _runs(store, tags)
    if not runs:  # a gate with nothing to check does not pass silently (a mistyped tag)
        raise TraceInputError(store, "no runs to check" + (" with the tags given (" + ", ".join(
            f"{k}={v}" for k, v in sorted(tags.items())) + ")" if tags else ""))
    if baseline is not None and baseline not in {r.label for r in runs}:
        raise TraceInputError(store, f"no run labelled {baseline!r}"
                              + (" with the tags given" if tags else ""))
    res = build(runs, window, fail_above, baseline)
    _print(fmt, res, lambda: render.check_tables(res), lambda: render.csv_rows(res.runs),
           "tracelens history check")
    for g in res.regressions:
        click.echo(f"regression: {g.label} ({g.series}): step {g.change_pct:+.1f}% against "
                   f"{g.baseline_label}, since {g.first_label}", err=True)
    if res.regressions:
        sys.exit(1)


@history.command()
@store_option
@click.option("-o", "--out", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="The folder to write the Parquet files in (created).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@guarded
def export(store: Path, out: Path, debug: bool) -> None:
    """The store as Parquet files (one per table) for dashboards."""
    from tracelens.history.export import export_parquet

    for p in export_parquet(_runs(store), out):
        click.echo(str(p))
