"""``tracelens history``: record runs in a store and find regressions across them.

``add`` records runs, ``list`` and ``show`` read them back, ``check`` is the CI gate (exit 1
when the newest run of a series regressed), ``export`` writes Parquet. A store that cannot be
read is exit 2 with one line, and left as it is (:mod:`tracelens.history.store`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import click

from tracelens.api.history import DEFAULT_WINDOW
from tracelens.cli.common import (analysis_options, format_option, guarded, html_option,
                                  print_result, write_output)

if TYPE_CHECKING:
    from reports.scaling import Tables



store_option = click.option("--store", required=True, type=click.Path(path_type=Path),
                            help="The run store (an SQLite file; `add` creates it).")
tag_option = click.option("--tag", "tags", multiple=True, metavar="KEY=VALUE",
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
@analysis_options(filters=False)
@guarded
def add(paths: tuple[Path, ...], store: Path, label: str | None, tags: tuple[str, ...],
        recorded_at: str | None, **opts: Any) -> None:
    """Record the run behind PATH... (one job) in the store."""
    from tracelens.api.history import history_record

    got = history_record(paths, store, label, tags, recorded_at,
                         step_marker=opts["step_marker"], rules=opts["rules_files"],
                         workers=opts["workers"], scheduler=opts["scheduler"])
    if got.record is None:
        click.echo(f"already recorded as {got.label} (same inputs); nothing added", err=True)
        return
    click.echo(f"recorded {got.label}: step {got.record.step_ns / 1e6:,.3f} ms, "
               f"series {got.record.series}")


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
def list_runs(store: Path, tags: tuple[str, ...], fmt: str, debug: bool) -> None:
    """Every recorded run, in the order recorded."""
    from reports import history as render
    from tracelens.api.history import history_runs
    from tracelens.results.history import RunPoint

    runs = history_runs(store, tags)
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
def show(store: Path, tags: tuple[str, ...], metric: str, window: int, fail_above: float,
         fmt: str, html: Path | None, debug: bool) -> None:
    """The runs' trend per series, regressions marked (as `check` finds them run by run)."""
    from reports import history as render
    from tracelens.api.history import history_show

    res = history_show(store, tags, metric, window, fail_above)
    if html is not None:
        write_output(html, lambda: render.render_html(res, str(store)), "--html")
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
def check(store: Path, tags: tuple[str, ...], baseline: str | None, window: int,
          fail_above: float, fmt: str, debug: bool) -> None:
    """Exit 1 when the newest run of a series regressed (for CI)."""
    from reports import history as render
    from tracelens.api.history import history_check

    res = history_check(store, tags, baseline, window, fail_above)
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
    from tracelens.api.history import history_export

    for p in history_export(store, out):
        click.echo(str(p))
