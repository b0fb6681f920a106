"""``tracelens critical-path``: the command, added to ``main`` by
:mod:`tracelens.cli.commands`: options -> the facade's
:meth:`~tracelens.api.analysis.TraceAnalysis.critical_path` -> render
(:mod:`reports.critical_path`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracelens.cli.common import (analysis, analysis_options, guarded, print_result,
                                  say_replaced, warn)


@click.command("critical-path")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--step", type=int, default=None,
              help="The step to analyze (default: the middle step by number; the whole trace "
                   "without steps).")
@click.option("--window", default=None, metavar="REGEX[#k]",
              help="The window is the k-th (from 0) host annotation whose name matches "
                   "REGEX, on each rank (instead of a step).")
@click.option("--time", "span", default=None, metavar="START:END",
              help="The window is this stretch on every rank, from the job's first activity "
                   "or step (ns, or with ns/us/ms/s; either side may be empty); wins over "
                   "--step and --window. The job is then read whole in this process.")
@click.option("--rank", type=int, default=None, help="Only this rank's paths.")
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many what-if projections to list.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]),
              default="table", show_default=True)
@click.option("--perfetto", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write the paths as a Perfetto trace, linked by flow events.")
@analysis_options(filters=False)
@guarded
def critical_path(paths: tuple[Path, ...], step: int | None, window: str | None,
                  span: str | None, rank: int | None, top: int, fmt: str,
                  perfetto: Path | None, **opts: Any) -> None:
    """What sets the step time: the critical path per device, and what each fix saves."""
    from reports import critical_path as render
    from tracelens.api.inputs import check_output_path
    from tracelens.api.outputs import replacing

    old = replacing([perfetto])
    if perfetto is not None:
        check_output_path(perfetto, paths, "--perfetto")
    # only the JSON and the Perfetto trace list the paths' activities; the step path's are
    # what the consistency gate bounds the what-ifs by, in every format
    listed = "all" if fmt == "json" or perfetto is not None else "longest"
    res = analysis(paths, opts).critical_path(step, window, span, rank, top, listed)
    warn([*res.warnings, *res.consistency.lines()], opts["quiet"])
    if perfetto is not None:
        render.write_perfetto(res, perfetto)
        if not opts["quiet"]:
            say_replaced(old)
    print_result(fmt, lambda: render.render_json(res), lambda: "",
                 lambda: render.render_markdown(res),
                 lambda console: render.render_table(res, console))
