"""``tracelens axes``: communication per mesh axis: options -> the facade's
:meth:`~tracelens.api.analysis.TraceAnalysis.axes` -> render."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import click

from tracelens.cli.common import (analysis, analysis_options, format_option, guarded,
                                  print_result, warn)


def axes_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--mesh, --nic-gb-per-s, --ranks-per-host (``AxesOptions``; the facade parses and
    checks --mesh)."""
    func = click.option(
        "--ranks-per-host", type=click.IntRange(min=1), default=None,
        help="For traces that name no hosts (PyTorch): rank r is on host r // N.")(func)
    func = click.option(
        "--nic-gb-per-s", type=click.FloatRange(min=0, min_open=True), default=None,
        help="Inter-node link peak per GPU and direction (GB/s): busbw of axes that cross "
             "hosts is compared with it (unknown without).")(func)
    return click.option(
        "--mesh", default=None, metavar="NAME=SIZE,...",
        help="The device mesh, outermost axis first (e.g. dp=8,tp=8): names the axes. "
             "Default: inferred from the process groups, named by the trace or "
             "axis0..k.")(func)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@axes_options
@format_option
@analysis_options(filters=False)
@guarded
def axes(paths: tuple[Path, ...], mesh: str | None, nic_gb_per_s: float | None,
         ranks_per_host: int | None, fmt: str, **opts: Any) -> None:
    """Collectives per mesh axis: count, bytes, time, exposed time and busbw of each axis,
    and the collectives without one, by reason."""
    from reports import axes as render

    res = analysis(paths, opts).axes(mesh, nic_gb_per_s, ranks_per_host)
    warn(res.warnings, opts["quiet"])
    print_result(fmt, lambda: render.render_json(res), lambda: render.render_csv(res),
                 lambda: render.render_markdown(res),
                 lambda console: render.render_table(res, console))
