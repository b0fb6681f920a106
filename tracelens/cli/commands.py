"""The ``tracelens`` command. Every command is its options, one call of the facade
(:mod:`tracelens.api.analysis`: loading, the engine, every check of the arguments), then a
renderer (:mod:`reports`); the options the commands share are composed once
(:func:`tracelens.cli.common.analysis_options`).

Exit codes: 0 success; 1 a requested check failed; 2 bad usage or unreadable input, with one
line ``error: <path>: <what is wrong>`` on stderr and no traceback unless ``--debug``.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any, Callable

import click

from tracelens import __version__
from tracelens.cli.common import (analysis, analysis_options, facade_inputs, format_option,
                                  guarded, html_option, print_result, say_replaced,
                                  warn, write_output)
from tracelens.api.outputs import replacing
from tracelens.cli.axes import axes as _axes, axes_options



@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracelens")
def main() -> None:
    """Where each training step's GPU time goes, from XProf XSpace (GPU, TPU, XLA:CPU),
    PyTorch profiler (Kineto) JSON, rocprofv3 (rocpd .db, JSON, CSV) and rpd_tracer (.rpd)
    traces."""
    _fewer_collections()
    _no_blas_threads()
    _fewer_page_faults()


def _no_blas_threads() -> None:
    """One OpenBLAS thread for the numpy this command imports (unless the caller chose a
    number, or numpy is already loaded). tracelens makes no BLAS call, but OpenBLAS starts a
    thread per core at ``import numpy`` and they spin before they sleep: 60 ms of CPU per
    process on a 2-core machine, a tenth of a small ``summarize``. Dask workers the command
    starts inherit the setting."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
_KEEP_BYTES = 64 << 20


def _fewer_page_faults() -> None:
    """glibc's malloc (numpy's arrays) keeps freed memory up to 64 MB for the next array
    instead of handing every array over 32 MB back to the kernel: a 2M-row column is 16 MB,
    and each fresh one cost a page fault per 4 kB (300k faults, 0.1 s of the 3.3 s of a
    2M-kernel ``summarize``; peak memory +0-25 MB). Only in the command's own process, and
    only with glibc (elsewhere nothing changes)."""
    try:
        if not sys.platform.startswith("linux") or not os.confstr("CS_GNU_LIBC_VERSION"):
            return
    except (ValueError, OSError):  # a C library that does not name itself (musl)
        return
    import ctypes

    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, _KEEP_BYTES)
        mallopt(_M_TRIM_THRESHOLD, _KEEP_BYTES)


def _fewer_collections() -> None:
    """Raise the garbage collector's first threshold (700 allocations) to 100,000 while the
    command runs, as mypy does; restored when it ends (in-process callers, tests). A command
    imports ~100k long-lived objects (numpy, the analyses) that the collector otherwise
    scans again and again: 60 ms of a 0.6 s ``summarize`` of a small Kineto trace, 170 ms of
    a 1.6 MB rocprofv3 JSON one. Only cyclic garbage waits longer; tracelens makes little."""
    old = gc.get_threshold()
    gc.set_threshold(100_000, *old[1:])
    click.get_current_context().call_on_close(lambda: gc.set_threshold(*old))


PATHS = click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
DEVICE = click.option("--device", type=int, default=None,
                      help="Only this device ordinal (every host).")
STEP = click.option("--step", type=int, default=None, help="Only this step's window.")


@main.command()
@PATHS
@DEVICE
@STEP
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many top kernels to list.")
@click.option("--all", "all_rows", is_flag=True,
              help="Every device in the tables (past 16 devices they show the median, best, "
                   "worst and outliers), and each device's peak memory where the trace "
                   "records allocator events (also in the JSON).")
@format_option
@analysis_options(gpu=True)
@guarded
def summarize(paths: tuple[Path, ...], device: int | None, step: int | None, top: int,
              all_rows: bool, fmt: str, **opts: Any) -> None:
    """Headline, per-device timeline, categories, steps, top kernels, roofline and MFU."""
    from reports import summary as render

    result = analysis(paths, opts).summarize(device, step, top, memory=all_rows)
    print_result(fmt, lambda: render.render_json(result), lambda: render.render_csv(result),
                 lambda: render.render_markdown(result, all_rows),
                 lambda console: render.render_table(result, console, all_rows))
    if not opts["quiet"] and fmt != "json":  # the JSON holds them in its own fields
        for line in render.stderr_lines(result):
            click.echo(line, err=True)


@main.command()
@format_option
@click.option("--gpu-specs", "gpu_specs", type=click.Path(path_type=Path), default=None,
              help="Also list (and apply) the entries of this TOML/JSON specs file.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@guarded
def gpus(fmt: str, gpu_specs: Path | None, debug: bool) -> None:
    """The GPU peak table the roofline and MFU use (dense; sources with --format json)."""
    from tracelens.core import hardware
    from tracelens.api.inputs import load_gpu_specs
    from reports import gpus as render

    specs = {**hardware.SPECS, **(load_gpu_specs(None, gpu_specs) or {})}
    text = render.render(specs, fmt)
    if text is not None:
        click.echo(text, nl=not text.endswith("\n"))


@main.command()
@click.argument("name")
@click.option("--op", default=None, help="The op that launched the kernel: its HLO op "
              "(all-gather-start.3) or, in a PyTorch trace, its ATen op (aten::silu).")
@click.option("--kind", type=click.Choice(["kernel", "memcpy", "memset"]), default="kernel",
              show_default=True)
@click.option("--hlo-category", "hlo_category", default=None, metavar="CATEGORY",
              help="A TPU op's XLA category as its trace gives it (e.g. 'convolution fusion').")
@analysis_options(filters=False, engine=False, step_marker=False)
@guarded
def explain(name: str, op: str | None, kind: str, hlo_category: str | None,
            **opts: Any) -> None:
    """Which category NAME gets, the layer and rule that decided it (library rules, then the
    words inside the name, then the launching op given with --op; a TPU op's XLA category
    with --hlo-category), and why."""
    from tracelens.api.history import explain as explain_name

    m = explain_name(name, op, kind, hlo_category, opts["rules_files"])
    layer = {"library": "library rule", "name words": "name words (no library rule knew it)",
             "launching op": "launching op (neither a library rule nor the name's words said)",
             "fallback": "none: no rule recognised it",
             "user": "user rule (--rules)"}[m.layer]
    click.echo(f"category:    {m.category}")
    click.echo(f"subcategory: {m.subcategory or '-'}")
    click.echo(f"layer:       {layer}")
    click.echo(f"rule:        {m.rule_id}")
    click.echo(f"why:         {m.description}")
    conds = ", ".join(f"{k} = {v!r}" for k, v in m.conditions.items()) or "(catch-all)"
    click.echo(f"matches:     {conds}")
    if m.words is not None:
        text = "op" if m.conditions.get("words_in") == "op" else "name"
        click.echo(f"words:       {m.words!r} (the {text}'s words); found "
                   + " and ".join(repr(f) for f in m.found))


@main.command()
@PATHS
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many worst instances to list.")
@axes_options
@format_option
@analysis_options()
@guarded
def collectives(paths: tuple[Path, ...], top: int, mesh: str | None,
                nic_gb_per_s: float | None, ranks_per_host: int | None, fmt: str,
                **opts: Any) -> None:
    """Collectives: per-type time, exposure and busbw; per mesh axis; worst instances;
    stragglers."""
    from reports import collectives as render

    res = analysis(paths, opts).collectives_report(top, mesh, nic_gb_per_s, ranks_per_host)
    warn(res.warnings, opts["quiet"])
    print_result(fmt, lambda: render.render_json(res), lambda: render.render_csv(res),
                 lambda: render.render_markdown(res),
                 lambda console: render.render_table(res, console))


@main.command()
@PATHS
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many groups of allocations live at the peak to list.")
@format_option
@analysis_options(filters=False, engine=False)
@guarded
def memory(paths: tuple[Path, ...], top: int, fmt: str, **opts: Any) -> None:
    """Memory: per device its capacity, peak bytes in use and when (time, step, the op that
    allocated last), what is live at the peak, the peak per step (from the allocator's
    events: XSpace MemoryAllocation/MemoryDeallocation, Kineto [memory])."""
    from reports import memory as render

    res = analysis(paths, opts).memory_report(top)
    warn(res.warnings, opts["quiet"])
    print_result(fmt, lambda: render.render_json(res), lambda: render.render_csv(res),
                 lambda: render.render_markdown(res),
                 lambda console: render.render_table(res, console))


def _write_html(html: Path | None, page: Callable[[], str]) -> None:
    """``--html``: the result also as a self-contained page (only a regular file is
    replaced, and said)."""
    if html is None:
        return
    write_output(html, page, "--html")


def _emit(fmt: str, result: Any, title: str, tables: Any, csv_rows: Any,
          csv_cols: list[str], html: Path | None = None) -> None:
    from reports import scaling as render

    if html is not None:
        from reports.html.diagnosis import render_diagnosis
        _write_html(html, lambda: render_diagnosis(result))
    print_result(fmt, lambda: render.render_json(result),
                 lambda: render.render_csv(csv_rows, csv_cols),
                 lambda: render.render_markdown(title, tables),
                 lambda console: render.render_table(tables, console))


@main.command()
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--fail-above", type=float, default=None, metavar="PCT",
              help="Exit 1 when the step time grows by more than PCT percent.")
@click.option("--top", type=click.IntRange(min=0), default=15, show_default=True)
@format_option
@html_option
@analysis_options()
@guarded
def compare(base: Path, new: Path, fail_above: float | None, top: int, fmt: str,
            html: Path | None, **opts: Any) -> None:
    """Where NEW spends more (or less) time per step than BASE."""
    from dataclasses import asdict, replace

    from tracelens.api.analysis import compare as build
    from reports.scaling import compare_tables

    inputs = facade_inputs((base, new), opts) | {"progress": None}
    res = build(base, new, top=top, fail_above=fail_above, **inputs)
    shown = replace(res, warnings=()) if opts["quiet"] and fmt == "table" else res
    warn(res.warnings, opts["quiet"])
    _emit(fmt, res, "tracelens compare", compare_tables(shown),
          [asdict(c) for c in res.components],
          ["component", "base_ns", "new_ns", "delta_ns", "share"], html=html)
    if res.gate.regression:
        click.echo(f"regression: step time grew {res.delta_pct:.1f}% (limit {fail_above}%)",
                   err=True)
        sys.exit(1)


@main.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--strong", is_flag=True,
              help="Strong scaling: the same global work, so step time should shrink.")
@format_option
@html_option
@analysis_options()
@guarded
def scaling(runs: tuple[Path, ...], strong: bool, fmt: str, html: Path | None,
            **opts: Any) -> None:
    """Why step time changes from one run to the next (e.g. 8 → 64 GPUs)."""
    from tracelens.api.analysis import scaling as build
    from reports.scaling import scaling_tables

    inputs = facade_inputs(runs, opts) | {"progress": None}
    res = build(list(runs), strong=strong, **inputs)
    rows = [{"from": t.from_path, "to": t.to_path, "component": c.component,
             "delta_ns": c.delta_ns, "share": c.share}
            for t in res.transitions for c in t.causes]
    warn([w for t in res.transitions for w in t.warnings], opts["quiet"])
    _emit(fmt, res, "tracelens scaling", scaling_tables(res), rows,
          ["from", "to", "component", "delta_ns", "share"], html=html)


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--program", default=None, metavar="NAME|ID",
              help="Only this program (HLO module name or program id).")
@click.option("--top", type=click.IntRange(min=0), default=20, show_default=True,
              help="How many findings to list.")
@click.option("--devices-per-host", type=click.IntRange(min=1), default=None, metavar="N",
              help="Device ids in replica groups are host-major, N per host (decides which "
                   "groups span hosts where the input does not say).")
@format_option
@html_option
@analysis_options(filters=False, step_marker=False)
@guarded
def hlo(path: Path, program: str | None, top: int, devices_per_host: int | None, fmt: str,
        html: Path | None, **opts: Any) -> None:
    """Why communication costs what it does, read from the compiled HLO: collectives per
    program and findings (collective in a loop, upcast, no overlap window, small, repeated
    gather, cross-host), each with its measured exposed time per step when PATH is a trace.
    PATH may also be an XLA dump: a file (*.after_optimizations.txt, or a serialized HloProto)
    or a --xla_dump_to directory (its optimized modules)."""
    from reports import hlo as render

    result = analysis((path,), opts).hlo_lens(program, top, devices_per_host)
    _write_html(html, lambda: render.render_html(result, f"tracelens hlo {path.name}"))
    print_result(fmt, lambda: render.render_json(result), lambda: render.render_csv(result),
                 lambda: render.render_markdown(result),
                 lambda console: render.render_table(result, console))


@main.command()
@PATHS
@click.option("-o", "--output", "output", required=True, type=click.Path(path_type=Path),
              help="The HTML file to write (only there; nothing is written next to inputs).")
@click.option("--title", default=None, help="Report title (default: the input file names).")
@DEVICE
@STEP
@click.option("--top", type=click.IntRange(min=0), default=100, show_default=True,
              help="How many top kernels the report's table holds.")
@click.option("--memory", is_flag=True,
              help="Also each device's memory over the profile, where the trace records "
                   "allocator events (read in a second pass over the files).")
@analysis_options(gpu=True)
@guarded
def report(paths: tuple[Path, ...], output: Path, title: str | None, device: int | None,
           step: int | None, top: int, memory: bool, **opts: Any) -> None:
    """One self-contained HTML report (charts and tables; opens offline). Per host on the
    engine (--workers, --scheduler), each host file read once; with --host or --time every
    host is loaded in this process."""
    old = replacing([output])
    size = analysis(paths, opts).report(output, title, device, step, top, memory)
    if not opts["quiet"]:
        say_replaced(old)
        click.echo(f"wrote {output} ({size / 1e6:.1f} MB)", err=True)


@main.command()
@PATHS
@click.option("-o", "--output", "output", type=click.Path(path_type=Path), default=None,
              help="Write a table here; the format from the extension: .parquet (default), "
                   ".csv, .jsonl.")
@click.option("--table", type=click.Choice(["events", "host_events", "kernels", "steps",
                                            "devices", "collectives"]), default="events",
              show_default=True,
              help="Which table -o writes. host_events: the host side (API calls, CPU ops, "
                   "annotations, markers) with host, rank, pid, tid, name, start_ns, end_ns, "
                   "correlation_id (to the device activity it launched) and kind; --host "
                   "narrows it, --time, --category and --kernel select device activities and "
                   "are refused with it.")
@click.option("--perfetto", type=click.Path(path_type=Path), default=None,
              help="Write a Chrome/Perfetto trace-event file (.json or .json.gz).")
@analysis_options(engine=False)
@guarded
def export(paths: tuple[Path, ...], output: Path | None, table: str, perfetto: Path | None,
           **opts: Any) -> None:
    """Take the data away: an event or statistics table, or a timeline for Perfetto."""
    old = replacing([output, perfetto])
    for path, what in analysis(paths, opts).export(output, table, perfetto):
        if not opts["quiet"]:
            say_replaced([p for p in old if p == path])
            click.echo(f"wrote {path} ({what})", err=True)


@main.command()
@click.argument("path", type=click.Path(path_type=Path))
@format_option
@analysis_options(filters=False, engine=False, step_marker=False)
@guarded
def xcheck(path: Path, fmt: str, **opts: Any) -> None:
    """Our kernel table next to XProf's own kernel_stats for an XSpace file, or for each one
    in a folder (as summarize finds them; other trace files and all-CPU ones are listed as
    not checked) (needs tracelens[xprof]); exit 1 when any kernel's count or time differs."""
    from reports import xcheck as render

    res = analysis((path,), opts).xcheck()
    rows, skipped = list(res.rows), [(s.file, s.reason) for s in res.skipped]
    if fmt == "csv" and skipped and not opts["quiet"]:
        click.echo(render.skipped_note(skipped), err=True)
    print_result(fmt, lambda: render.render_json(res), lambda: render.render_csv(rows),
                 lambda: render.render_markdown(rows, skipped),
                 lambda console: render.render_table(rows, console, skipped))
    if not all(r.agrees for r in rows):
        sys.exit(1)


from tracelens.cli.history import history  # noqa: E402  (`tracelens history`)
main.add_command(history)
from tracelens.cli.critical_path import critical_path  # noqa: E402
main.add_command(critical_path)
main.add_command(_axes)



def run() -> None:
    """The installed ``tracelens`` command: :func:`main`, then an exit that skips the
    interpreter's last scan of every object the command made. At exit CPython collects the
    cyclic garbage once more, walking all of a 2M-event run's objects only to free memory the
    process is about to give back (0.06 s of a 2.9 s ``summarize``); frozen, they are not
    walked. Open files, ``atexit`` handlers (a Dask cluster's) and modules end as before.
    In-process callers (tests, notebooks) call :func:`main` and keep their collector."""
    try:
        main()
    finally:
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    run()
