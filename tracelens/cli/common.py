"""What every ``tracelens`` command shares: error handling (exit 2 and one line), progress
on stderr, output dispatch, and the option groups (format, HTML, step marker, filters, GPU
specs, engine, rules), composed once (:func:`analysis_options`) and turned into the facade
(:func:`analysis`). The commands themselves are in :mod:`tracelens.cli.commands`; every check of
their arguments is the facade's (:mod:`tracelens.api.inputs`)."""

from __future__ import annotations

import functools
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import click

from tracelens.core.errors import TraceInputError, TraceUsageError
from tracelens.core.categories import CATEGORIES  # not the model: --help needs no polars

if TYPE_CHECKING:
    from tracelens.api.analysis import TraceAnalysis

FORMATS = ["table", "json", "csv", "markdown"]
PROGRESS_MIN_BYTES = 20 * 1024 * 1024


def fail_with(message: str, debug: bool) -> None:
    if debug:
        traceback.print_exc()
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def guarded(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn input errors into one line on stderr and exit code 2 (bad arguments into
    click's usage error, also exit 2)."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        debug = bool(kwargs.get("debug"))
        try:
            return func(*args, **kwargs)
        except TraceInputError as exc:
            fail_with(f"{exc.path}: {exc.problem}", debug)
        except TraceUsageError as exc:  # click's usage text, as for its own checks
            if exc.option is not None:
                raise click.BadParameter(exc.problem, param_hint=f"'{exc.option}'") from None
            raise click.UsageError(exc.problem) from None
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


def warn(warnings: Sequence[str], quiet: bool) -> None:
    """A result's warnings (the readers', different hardware or programs, an unknown noise
    floor) on stderr, once each, whatever the format (stdout holds the result alone; each is
    also in the JSON)."""
    if quiet:
        return
    for w in warnings:
        click.echo(f"warning: {w}", err=True)


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


def say_replaced(paths: Sequence[Path]) -> None:
    """``note: replaced <path>`` on stderr for each existing file an output replaced."""
    for p in paths:
        click.echo(f"note: replaced {p} (it existed)", err=True)


def write_output(path: Path, text: Callable[[], str], flag: str) -> None:
    """A text output (an HTML page) written to ``path``: checked first (only a regular file
    is replaced: :func:`tracelens.api.outputs.check_target`), and a replaced file said."""
    from tracelens.api.outputs import check_target

    existed = check_target(path, flag)
    try:
        path.write_text(text(), encoding="utf-8")
    except OSError as exc:
        raise TraceInputError(path, f"cannot write: {exc.strerror or exc}") from None
    if existed:
        say_replaced([path])


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


def gpu_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--gpu-specs", "gpu_specs", type=click.Path(path_type=Path),
                        default=None, help="GPU peaks file (TOML or JSON) adding to or "
                        "replacing the built-in table (tracelens gpus).")(func)
    func = click.option("--gpu", default=None,
                        help="Use this GPU's peaks for every device (tracelens gpus).")(func)
    return func


step_marker_option = click.option(
    "--step-marker", default=None, metavar="REGEX",
    help="Steps are the host markers matching REGEX (rocprofv3 ROCTx ranges, XSpace host "
         "annotations; the number from the group 'step' or the first group, else their "
         "order), else the executions of a program whose module name matches REGEX.")
format_option = click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
                             show_default=True)
html_option = click.option("--html", type=click.Path(path_type=Path, dir_okay=False),
                           default=None,
                           help="Also write the result as a self-contained HTML page.")


def filter_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--category, --kernel, --host, --time: narrow the trace before any analysis."""
    func = click.option("--time", "time_window", default=None, metavar="START:END",
                        help="Only this stretch, from the trace's first activity or step "
                             "(ns, or with ns/us/ms/s; either side may be empty).")(func)
    func = click.option("--host", "hosts", multiple=True, metavar="NAME",
                        help="Only this host (repeatable).")(func)
    func = click.option("--kernel", default=None, metavar="REGEX",
                        help="Only activities whose name matches REGEX.")(func)
    func = click.option("--category", "categories", multiple=True,
                        type=click.Choice(list(CATEGORIES)),
                        help="Only activities of this category (repeatable).")(func)
    return func


def common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    func = click.option("--rules", "rules_files", multiple=True, type=click.Path(),
                        help="Extra classifier rules (TOML); they take precedence.")(func)
    func = click.option("--quiet", is_flag=True, help="No progress bar or warnings on stderr.")(
        func)
    func = click.option("--debug", is_flag=True, help="Show tracebacks.")(func)
    return func


def engine_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--workers, --scheduler: where the per-host map of the command runs
    (:mod:`tracelens.engine.hosts`); the output is byte-identical wherever it runs."""
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


Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def analysis_options(filters: bool = True, gpu: bool = False, engine: bool = True,
                     step_marker: bool = True) -> Decorator:
    """The option groups of a command that reads a job, composed once: ``--step-marker``,
    the filters (``--category``, ``--kernel``, ``--host``, ``--time``), ``--gpu`` and
    ``--gpu-specs``, the engine (``--workers``, ``--scheduler``) and ``--rules``,
    ``--quiet``, ``--debug``; their values reach the command as keywords for
    :func:`analysis`."""
    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        func = common_options(func)
        if engine:
            func = engine_options(func)
        if gpu:
            func = gpu_options(func)
        if filters:
            func = filter_options(func)
        if step_marker:
            func = step_marker_option(func)
        return func
    return decorate


def facade_inputs(paths: tuple[Path, ...], opts: dict[str, Any]) -> dict[str, Any]:
    """The facade's keywords (:class:`tracelens.api.analysis.TraceAnalysis`) from a command's
    shared options (:func:`analysis_options`), with the progress bar for ``paths``."""
    return {"gpu": opts.get("gpu"), "gpu_specs": opts.get("gpu_specs"),
            "rules": opts.get("rules_files") or None, "step_marker": opts.get("step_marker"),
            "workers": opts.get("workers"), "scheduler": opts.get("scheduler"),
            "categories": opts.get("categories", ()), "kernel": opts.get("kernel"),
            "hosts": opts.get("hosts", ()), "time": opts.get("time_window"),
            "progress": progress_bar(list(paths), bool(opts.get("quiet")))}


def analysis(paths: tuple[Path, ...], opts: dict[str, Any]) -> TraceAnalysis:
    """The facade for ``paths`` and the command's shared options: it checks them all."""
    from tracelens.api.analysis import TraceAnalysis

    return TraceAnalysis(paths, **facade_inputs(paths, opts))
