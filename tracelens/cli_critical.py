"""``tracelens critical-path``: the command (issue 27), added to ``main`` by
:mod:`tracelens.cli`. The analysis is :mod:`tracelens.analyze.critical_path`, run on the
engine (:func:`tracelens.engine.run`); rendering is :mod:`reports.critical_path`."""

from __future__ import annotations

from pathlib import Path

import click

from tracelens.cli_common import (check_output_path, common_options, engine_options, guarded,
                                  load_rule_files, print_result, step_marker_option,
                                  time_window_option)


@click.command("critical-path")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--step", type=int, default=None,
              help="The step to analyze (default: the middle step by number; the whole trace "
                   "without steps).")
@click.option("--window", default=None, metavar="REGEX[#k]",
              help="The window is the k-th (from 0) host annotation whose name matches "
                   "REGEX, on each rank (instead of a step).")
@click.option("--time", "time_window", default=None, metavar="START:END",
              callback=time_window_option,
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
@step_marker_option
@engine_options
@common_options
@guarded
def critical_path(paths: tuple[Path, ...], step: int | None, window: str | None,
                  time_window: tuple[int | None, int | None] | None, rank: int | None,
                  top: int, fmt: str, perfetto: Path | None,
                  step_marker: str | None, workers: int | None, scheduler: str | None,
                  rules_files: tuple[str, ...], quiet: bool, debug: bool) -> None:
    """What sets the step time: the critical path per device, and what each fix saves."""
    from reports import critical_path as render
    from tracelens.analyze.critical_graph import window_pattern
    from tracelens.analyze.critical_path import CriticalPath, CriticalPathOptions
    from tracelens.engine import EngineOptions, LoadOptions, run

    if perfetto is not None:
        check_output_path(perfetto, paths, "--perfetto")
    if window is not None:
        window_pattern(window)  # a bad regex fails before any file is read
    # only the JSON and the Perfetto trace list the paths' activities
    listed = "all" if fmt == "json" or perfetto is not None else "none"
    opts = CriticalPathOptions(step=step, window=window, rank=rank, top=top, time=time_window,
                               activities=listed)
    res = run(CriticalPath(), paths, opts, LoadOptions(load_rule_files(rules_files),
                                                       step_marker),
              EngineOptions(workers, scheduler))
    if rank is not None and not res.paths and not res.notes:
        raise click.UsageError(f"--rank {rank}: no such rank with device activity")
    if not res.paths:
        from tracelens.errors import TraceInputError

        why = res.notes[0] if res.notes else "no device activity"
        raise TraceInputError(", ".join(map(str, paths)), f"no critical path: {why}")
    if perfetto is not None:
        render.write_perfetto(res, perfetto)
    print_result(fmt, lambda: render.render_json(res), lambda: "",
                 lambda: render.render_markdown(res),
                 lambda console: render.render_table(res, console))
