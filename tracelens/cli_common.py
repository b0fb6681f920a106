"""What every ``tracelens`` command shares: error handling (exit 2 and one line), progress
on stderr, output dispatch, and the option groups (format, HTML, step marker, filters, GPU
specs, rules). The commands themselves are in :mod:`tracelens.cli`."""

from __future__ import annotations

import functools
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

import click

from tracelens.errors import TraceInputError
from tracelens.categories import CATEGORIES  # not the model: --help needs no polars

if TYPE_CHECKING:
    from tracelens.analyze.axes import AxesOptions
    from tracelens.results.collectives import Collectives
    from tracelens.results.filters import ActiveFilters

FORMATS = ["table", "json", "csv", "markdown"]
PROGRESS_MIN_BYTES = 20 * 1024 * 1024


def fail_with(message: str, debug: bool) -> None:
    if debug:
        traceback.print_exc()
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def guarded(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn input errors into one line on stderr and exit code 2."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        debug = bool(kwargs.get("debug"))
        try:
            return func(*args, **kwargs)
        except TraceInputError as exc:
            fail_with(f"{exc.path}: {exc.problem}", debug)
        except BrokenPipeError:
            sys.exit(0)
    return wrapper


def progress_bar(paths: list[Path], quiet: bool
                 ) -> Callable[[Iterable[Path]], Iterable[Path]] | None:
    """A transient progress bar on stderr, only for a terminal and inputs that take a moment."""
    if quiet or not sys.stderr.isatty():
        return None
    try:
        size = sum(p.stat().st_size for p in paths if p.is_file())
    except OSError:
        return None
    if size < PROGRESS_MIN_BYTES and not any(p.is_dir() for p in paths):
        return None
    from rich.console import Console
    from rich.progress import track

    console = Console(stderr=True)
    return lambda files: track(list(files), description="reading traces", console=console,
                               transient=True)


def busy(what: str, quiet: bool) -> Any:
    """A transient spinner on stderr while an analysis runs (only on a terminal): the
    progress bar covers reading, this covers the rest."""
    import contextlib

    if quiet or not sys.stderr.isatty():
        return contextlib.nullcontext()
    from rich.console import Console
    return Console(stderr=True).status(what)


def print_result(fmt: str, as_json: Callable[[], str | bytes], as_csv: Callable[[], str],
            as_markdown: Callable[[], str], as_table: Callable[[Any], None]) -> None:
    """Print a result in the requested format; tables go to a rich console at least 120
    columns wide when stdout is not a terminal (a pipe or a file). JSON given as bytes
    (:func:`tracelens.results.encode.json_bytes`) goes to stdout's bytes as it is."""
    if fmt == "json":
        out = as_json()
        if isinstance(out, bytes):
            _write_bytes(out)
        else:
            click.echo(out)
    elif fmt == "csv":
        click.echo(as_csv(), nl=False)
    elif fmt == "markdown":
        click.echo(as_markdown())
    else:
        from rich.console import Console
        console = Console(soft_wrap=False)
        if not console.is_terminal:
            console.width = max(console.width, 120)
        as_table(console)


def _write_bytes(data: bytes) -> None:
    """``data`` and a newline on stdout's binary stream, after what its text stream holds
    (``click.echo`` would first copy ``data`` to append the newline: a GB for a whole
    trace's critical path)."""
    binary = getattr(sys.stdout, "buffer", None)
    if binary is None:  # a stream of text only (a notebook's, a StringIO)
        click.echo(data.decode("ascii"))
        return
    sys.stdout.flush()
    binary.write(data)
    binary.write(b"\n")
    binary.flush()


def load_rule_files(rules_files: tuple[str, ...]) -> Any:
    from tracelens.classify import load_rules
    return load_rules(list(rules_files)) if rules_files else None


def gpu_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--gpu-specs", "gpu_specs", type=click.Path(path_type=Path),
                        default=None, help="GPU peaks file (TOML or JSON) adding to or "
                        "replacing the built-in table (tracelens gpus).")(func)
    func = click.option("--gpu", default=None,
                        help="Use this GPU's peaks for every device (tracelens gpus).")(func)
    return func


def load_gpu_specs(gpu: str | None, gpu_specs: Path | None) -> Any:
    """The specs file's entries (None without one); bad files and unknown --gpu fail early."""
    from tracelens import hardware

    extra = None
    if gpu_specs is not None:
        try:
            extra = hardware.load_specs_file(gpu_specs)
        except OSError as exc:
            raise TraceInputError(gpu_specs, f"cannot read: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise TraceInputError(gpu_specs, f"bad GPU specs file: {exc}") from None
    table = {**hardware.SPECS, **(extra or {})}
    if gpu is not None:
        try:
            known = hardware.find_spec(gpu, table)
        except ValueError as exc:
            raise click.UsageError(f"--gpu {gpu}: {exc}") from None
        if known is None:
            raise click.UsageError(f"--gpu {gpu}: unknown GPU (known: {', '.join(table)})")
    return extra


def _check_regex(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        import re
        try:
            re.compile(value)
        except re.error as exc:
            raise click.BadParameter(f"not a regular expression: {exc}") from None
    return value


step_marker_option = click.option(
    "--step-marker", default=None, metavar="REGEX", callback=_check_regex,
    help="Steps are the host markers matching REGEX (rocprofv3 ROCTx ranges, XSpace host "
         "annotations; the number from the group 'step' or the first group, else their "
         "order), else the executions of a program whose module name matches REGEX.")
format_option = click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
                             show_default=True)
html_option = click.option("--html", type=click.Path(path_type=Path, dir_okay=False),
                           default=None,
                           help="Also write the result as a self-contained HTML page.")


def check_device_and_step(trace: Any, paths: tuple[Path, ...], device: int | None,
                   step: int | None) -> None:
    """``--device``/``--step`` must name a device or step of the trace: else the one-line
    input error (exit 2) naming what the trace holds."""
    check_known(paths, device, step, trace.steps["step"].to_list(), trace.meta.steps_source,
                trace.devices["device"].to_list())


def check_known(paths: tuple[Path, ...], device: int | None, step: int | None,
                steps: list[int], steps_source: str, devices: list[int]) -> None:
    """:func:`check_device_and_step` from the step numbers and device ordinals alone (what
    the engine's hosts report)."""
    where = Path(", ".join(str(p) for p in paths))
    if step is not None and step not in steps:
        known = sorted(set(steps))
        raise TraceInputError(where, f"step {step} is not in the trace (steps: "
                              f"{known[:20] if known else 'none'}, from {steps_source})")
    if device is not None and device not in devices:
        raise TraceInputError(where, f"device {device} is not in the trace (devices: "
                              f"{sorted(set(devices))})")


def time_window_option(ctx: click.Context, param: click.Parameter, value: str | None
                       ) -> tuple[int | None, int | None] | None:
    """``--time START:END`` parsed (:func:`tracelens.filters.parse_window`); a bad one is a
    usage error."""
    if value is None:
        return None
    from tracelens.filters import parse_window
    try:
        return parse_window(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--category, --kernel, --host, --time: narrow the trace before any analysis."""
    func = click.option("--time", "time_window", default=None, metavar="START:END",
                        callback=time_window_option,
                        help="Only this stretch, from the trace's first activity or step "
                             "(ns, or with ns/us/ms/s; either side may be empty).")(func)
    func = click.option("--host", "hosts", multiple=True, metavar="NAME",
                        help="Only this host (repeatable).")(func)
    func = click.option("--kernel", default=None, metavar="REGEX", callback=_check_regex,
                        help="Only activities whose name matches REGEX.")(func)
    func = click.option("--category", "categories", multiple=True,
                        type=click.Choice(list(CATEGORIES)),
                        help="Only activities of this category (repeatable).")(func)
    return func


def apply_filters(trace: Any, paths: tuple[Path, ...], categories: tuple[str, ...],
              kernel: str | None, hosts: tuple[str, ...],
              time_window: tuple[int | None, int | None] | None) -> tuple[Any, ActiveFilters]:
    """The trace narrowed by the filter options, and the filters in force (for outputs)."""
    from tracelens.filters import Filters, apply

    f = Filters(hosts=hosts, categories=categories, kernel=kernel, time=time_window)
    if not f.active():
        return trace, f.active()
    try:
        return apply(trace, f), f.active()
    except ValueError as exc:
        raise TraceInputError(Path(", ".join(str(p) for p in paths)), str(exc)) from None


def common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--rules", "rules_files", multiple=True, type=click.Path(),
                        help="Extra classifier rules (TOML); they take precedence.")(func)
    func = click.option("--quiet", is_flag=True, help="No progress bar or warnings on stderr.")(
        func)
    func = click.option("--debug", is_flag=True, help="Show tracebacks.")(func)
    return func


def check_output_path(path: Path, paths: tuple[Path, ...], flag: str) -> None:
    """Fail before reading the inputs when ``path`` cannot be an output file."""
    if path.exists() and path.is_dir():
        raise click.UsageError(f"{flag} {path} is a directory; give a file name")
    if not path.parent.is_dir():
        raise TraceInputError(path, f"cannot write: folder {path.parent} does not exist")
    resolved = path.resolve()
    if any(p.exists() and p.resolve() == resolved for p in paths):
        raise click.UsageError(f"{flag} {path} is one of the inputs")


def load_trace(paths: tuple[Path, ...], rules_files: tuple[str, ...], quiet: bool,
               step_marker: str | None = None) -> Any:
    """``tracelens.loader.load`` with the rule files, progress bar and step marker of the
    command's options."""
    from tracelens.loader import load

    return load(list(paths), rules=load_rule_files(rules_files),
                progress=progress_bar(list(paths), quiet), step_marker=step_marker)


def engine_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--workers, --scheduler: where the per-host map of the command runs
    (:mod:`tracelens.engine`); the output is byte-identical wherever it runs."""
    func = click.option(
        "--scheduler", default=None, metavar="ADDRESS", envvar="TRACELENS_SCHEDULER",
        help="Run the per-host map on the Dask cluster at ADDRESS (e.g. tcp://10.0.0.1:8786; "
             "env TRACELENS_SCHEDULER), whose workers can read the same paths and have "
             "tracelens installed.")(func)
    func = click.option(
        "--workers", type=click.IntRange(min=1), default=None, metavar="N",
        help="Map the host files on a local Dask cluster of N processes; 1: in this process "
             "(default: TRACELENS_WORKERS, else the core count, for several files of 64 MB or "
             "more together; in this process below that). With --host or --time every host "
             "is loaded in this process instead.")(func)
    return func


@dataclass(frozen=True)
class JobInputs:
    """What every analysis command reads and where: the paths, the loader's options, the
    filters (per row: ``categories``, ``kernel``; job-wide: ``hosts``, ``time``) and the
    engine's options -- gathered once from the command line."""

    paths: tuple[Path, ...]
    rules_files: tuple[str, ...] = ()
    step_marker: str | None = None
    categories: tuple[str, ...] = ()
    kernel: str | None = None
    hosts: tuple[str, ...] = ()
    time: tuple[int | None, int | None] | None = None
    workers: int | None = None
    scheduler: str | None = None
    quiet: bool = False

    def load(self) -> Any:
        """The engine's :class:`~tracelens.engine.LoadOptions` (the job-wide filters make
        it load the job whole, with the progress bar)."""
        from tracelens.engine import LoadOptions

        progress = progress_bar(list(self.paths), self.quiet) if self.hosts or \
            self.time is not None else None
        return LoadOptions(load_rule_files(self.rules_files), self.step_marker, self.hosts,
                           self.time, progress)

    def engine(self) -> Any:
        from tracelens.engine import EngineOptions

        return EngineOptions(self.workers, self.scheduler)

    def rows(self) -> Any:
        """The per-row filters (a :class:`tracelens.filters.Filters`)."""
        from tracelens.filters import Filters

        return Filters(categories=self.categories, kernel=self.kernel)

    def active(self) -> ActiveFilters:
        """Every filter in force, for the outputs' ``filters`` record."""
        from tracelens.filters import Filters

        return Filters(hosts=self.hosts, categories=self.categories, kernel=self.kernel,
                       time=self.time).active()


def engine_summary(job_in: JobInputs, device: int | None, step: int | None, top: int,
                   gpu: str | None, extra_specs: Any, window: bool = False) -> Any:
    """``summarize`` (:func:`tracelens.engine.run_tasks`: per host, or the job loaded whole
    for job-wide filters), the per-row filters applied on each host. With ``window``: (the
    summary, ``report``'s step-timeline window: from the same read of each host, but for
    the owners of shown devices whose own guess of the window missed the job's choice,
    read again: :mod:`tracelens.analyze.window_parts`)."""
    from tracelens.analyze.summary import SummaryAnalysis
    from tracelens.analyze.summary_types import SummaryOptions
    from tracelens.analyze.window_parts import WindowChoice, WindowOptions, job_window
    from tracelens.engine import run_tasks
    from tracelens.protocol import Task

    rows = job_in.rows()
    paths = job_in.paths
    opts = SummaryOptions(device=device, step=step, top=top, gpu=gpu, gpu_specs=extra_specs,
                          filters=rows if rows.active() else None)
    load, engine = job_in.load(), job_in.engine()
    tasks: list[Task[Any]] = [Task(SummaryAnalysis(), opts)]
    shown = WindowOptions(device, step, rows if rows.active() else None) if window else None
    if shown is not None:
        tasks.append(Task(WindowChoice(), shown))
    results, job = run_tasks(tasks, paths, load, engine, check=lambda job: check_known(
        paths, device, step, [s for h in job.hosts for s in h.steps], job.meta.steps_source,
        [d for h in job.hosts for d in h.devices]))
    summary = results[0].with_filters(job_in.active())  # type: ignore[attr-defined]
    if shown is None:
        return summary
    chosen = results[1]
    if chosen is None:
        return summary, None
    return summary, job_window(chosen, job, shown, load, engine)


def engine_collectives(job_in: JobInputs, top: int, axes: "AxesOptions | None" = None
                       ) -> "tuple[Collectives, str]":
    """``collectives`` (per host, or the job loaded whole for job-wide filters): (the typed
    result with its mesh axes, the steps source)."""
    from tracelens.analyze.axes import AxesOptions
    from tracelens.analyze.collective_partials import CollectivesAnalysis, CollectivesOptions
    from tracelens.engine import run_tasks
    from tracelens.protocol import Task

    results, job = run_tasks([Task(CollectivesAnalysis(),
                                   CollectivesOptions(job_in.rows(), top,
                                                      axes or AxesOptions()))],
                             job_in.paths, job_in.load(), job_in.engine())
    return results[0], job.meta.steps_source  # type: ignore[return-value]
