"""``tracelens axes``: communication per mesh axis (issue 28), on the engine (protocol)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import click

from tracelens.cli_common import (common_options, engine_options, format_option, guarded,
                                  load_rule_files, print_result, step_marker_option)


def _mesh(ctx: click.Context, param: click.Parameter, value: str | None
          ) -> tuple[tuple[str, int], ...]:
    if not value:
        return ()
    from tracelens.analyze.mesh import parse_mesh
    try:
        return parse_mesh(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def axes_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--mesh, --nic-gb-per-s, --ranks-per-host (``AxesOptions``)."""
    func = click.option(
        "--ranks-per-host", type=click.IntRange(min=1), default=None,
        help="For traces that name no hosts (PyTorch): rank r is on host r // N.")(func)
    func = click.option(
        "--nic-gb-per-s", type=click.FloatRange(min=0, min_open=True), default=None,
        help="Inter-node link peak per GPU and direction (GB/s): busbw of axes that cross "
             "hosts is compared with it (unknown without).")(func)
    return click.option(
        "--mesh", callback=_mesh, default=None, metavar="NAME=SIZE,...",
        help="The device mesh, outermost axis first (e.g. dp=8,tp=8): names the axes. "
             "Default: inferred from the process groups, named by the trace or "
             "axis0..k.")(func)


@contextmanager
def mesh_errors() -> Iterator[None]:
    """A --mesh that does not hold the job's devices: a usage error (exit 2)."""
    from tracelens.analyze.axes import MeshMismatch
    try:
        yield
    except MeshMismatch as exc:
        raise click.BadParameter(str(exc), param_hint="--mesh") from None


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@axes_options
@format_option
@step_marker_option
@engine_options
@common_options
@guarded
def axes(paths: tuple[Path, ...], mesh: tuple[tuple[str, int], ...],
         nic_gb_per_s: float | None, ranks_per_host: int | None, fmt: str,
         step_marker: str | None, workers: int | None, scheduler: str | None,
         rules_files: tuple[str, ...], quiet: bool, debug: bool) -> None:
    """Collectives per mesh axis: count, bytes, time, exposed time and busbw of each axis,
    and the collectives without one, by reason."""
    from tracelens.analyze.axes import AxesAnalysis, AxesOptions
    from tracelens.engine import EngineOptions, LoadOptions, run
    from reports import axes as render

    with mesh_errors():
        res = run(AxesAnalysis(), list(paths), AxesOptions(mesh, nic_gb_per_s, ranks_per_host),
                  load=LoadOptions(load_rule_files(rules_files), step_marker),
                  engine=EngineOptions(workers, scheduler))
    print_result(fmt, lambda: render.render_json(res), lambda: render.render_csv(res),
                 lambda: render.render_markdown(res),
                 lambda console: render.render_table(res, console))
