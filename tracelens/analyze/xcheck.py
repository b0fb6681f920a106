"""Cross-check against XProf's own converters: our per-kernel table next to XProf's
``kernel_stats`` for the same XSpace file (``tracelens xcheck``), file by file for a folder
(each XSpace file ``summarize`` would read there: one host's profile each).

XProf is an optional dependency (``pip install 'tracelens[xprof]'``); it writes cache files
next to its input, so it always runs on a copy in a temporary folder (inputs are read-only).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import polars as pl

from tracelens.core.errors import TraceInputError
from tracelens.core.model import Trace

REL_TOLERANCE = 1e-3
"""Summed durations agree when within this relative difference (XProf rounds to 1 ns in µs)."""


def kernel_stats_by_name(table: dict) -> dict[str, tuple[int, float]]:
    """XProf ``kernel_stats`` gviz table -> kernel name: (occurrences, total µs), summed over
    its rows (one row per name × op × launch configuration)."""
    cols = [c["id"] for c in table["cols"]]
    out: dict[str, list[float]] = {}
    for row in table["rows"]:
        r = dict(zip(cols, (c["v"] for c in row["c"])))
        acc = out.setdefault(r["kernel_name"], [0, 0.0])
        acc[0] += int(r["occurrences"])
        acc[1] += float(r["total_duration_us"])
    return {k: (int(v[0]), v[1]) for k, v in out.items()}


_RUN = """
import sys
from xprof.convert import raw_to_tool_data
data, _ = raw_to_tool_data.xspace_to_tool_data([sys.argv[1]], "kernel_stats", {})
sys.stdout.write(data.decode() if isinstance(data, bytes) else (data or ""))
"""


def xprof_kernel_stats(path: Path) -> dict[str, tuple[int, float]]:
    """XProf's ``kernel_stats`` of one XSpace file, per kernel name. XProf runs in a child
    process (its C++ logging stays out of our output, its crash is not ours) on a copy."""
    import subprocess
    import sys
    from importlib.util import find_spec

    if find_spec("xprof") is None:
        raise TraceInputError(path, "XProf is not installed: pip install 'tracelens[xprof]' "
                                    "(tensorboard-plugin-profile)")
    with tempfile.TemporaryDirectory(prefix="tracelens-xcheck-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copy(path, copy)
        done = subprocess.run([sys.executable, "-c", _RUN, str(copy)], capture_output=True,
                              text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise TraceInputError(path, f"XProf could not convert it: {last}")
    return kernel_stats_by_name(json.loads(done.stdout)) if done.stdout.strip() else {}


def xspace_files(path: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The XSpace files behind ``path`` (the file itself, or those of a folder, found as every
    command finds them: :func:`tracelens.loading.formats.discover`), and the other trace files
    found,
    each with why xcheck leaves it out. A file, or a folder, with no XSpace file is a
    :class:`TraceInputError`."""
    from tracelens.loading.formats import discover, sniff_format

    found, _ = discover(path)
    xspace = [f for f in found if sniff_format(f) == "xspace"]
    other = [(f, f"a {sniff_format(f)} trace, not XSpace") for f in found if f not in xspace]
    if not xspace:
        if not path.is_dir():
            raise TraceInputError(path, "xcheck compares XSpace files (.xplane.pb) with XProf")
        raise TraceInputError(path, "xcheck compares XSpace files (.xplane.pb) with XProf, "
                                    f"and the folder holds none ({_listed(other, path)})")
    return xspace, other


def _listed(items: list[tuple[Path, str]], base: Path) -> str:
    """``a.json: a kineto trace, not XSpace; ...`` (paths relative to the folder ``base``)."""
    return "; ".join(f"{label(f, base)}: {why}" for f, why in items)


def label(f: Path, base: Path) -> str:
    """How the outputs name ``f``: its path inside the folder ``base``, else its name."""
    return str(f.relative_to(base)) if base.is_dir() and f.is_relative_to(base) else f.name


def refuse_cpu_only(trace: Trace, path: Path) -> None:
    """XProf's ``kernel_stats`` lists GPU kernels only: on a trace whose devices are all XLA:CPU
    it has no row, and every op would be a disagreement that is not one."""
    vendors = trace.devices["vendor"]
    if trace.devices.height and (vendors == "cpu").all():
        raise TraceInputError(path, "XProf's kernel_stats lists GPU kernels only, and all "
                                    f"{trace.devices.height} devices of this trace are XLA:CPU "
                                    "devices: nothing to cross-check")
    if trace.devices.height and vendors.is_in(["cpu", "google"]).all():  # TPU: "0 agree"
        raise TraceInputError(path, "XProf's kernel_stats lists GPU kernels only, and the "
                                    f"{trace.devices.height} device(s) of this trace are TPU "
                                    "cores (XProf's op_profile is their view; not compared "
                                    "here): nothing to cross-check")


@dataclass(frozen=True)
class KernelCheck:
    """One kernel name: our count and total µs as read (before the loader's same-stream clip,
    as XProf sees them), the µs that clip took (0.0: none), XProf's count and total µs, and
    whether they agree."""

    name: str
    ours_count: int | None
    xprof_count: int | None
    ours_us: float | None
    xprof_us: float | None
    clipped_us: float | None = None
    file: str | None = None  # the file it was read from (a folder's path inside it)

    @property
    def agrees(self) -> bool:
        if self.ours_count is None or self.xprof_count is None:
            return False
        assert self.ours_us is not None and self.xprof_us is not None
        close = abs(self.ours_us - self.xprof_us) <= REL_TOLERANCE * max(abs(self.xprof_us), 1e-9)
        return self.ours_count == self.xprof_count and close


def compare_kernels(events: pl.DataFrame, theirs: dict[str, tuple[int, float]],
                    clips: pl.DataFrame | None = None) -> list[KernelCheck]:
    """Every kernel name of either side (XProf lists kernels, not memory copies),
    disagreements first, then by name. ``clips``: what the loader's same-stream clip took
    (``trace.meta.clips``); XProf does not clip, so that much is added back to our times
    before they are compared (and shown as ``clipped_us``), never a tolerance."""
    kernels = events.filter(pl.col("kind") == "kernel")
    taken: dict[str, int] = {}
    if clips is not None:
        taken = dict(clips.filter(pl.col("kind") == "kernel").group_by("name").agg(
            pl.col("clip_ns").sum()).iter_rows())  # overlap and nesting: XProf keeps both
    ours = {r["name"]: (int(r["n"]), (r["ns"] + taken.get(r["name"], 0)) / 1000.0,
                        taken.get(r["name"], 0) / 1000.0)
            for r in kernels.group_by("name").agg(
                n=pl.len(), ns=(pl.col("end_ns") - pl.col("start_ns")).sum())
            .iter_rows(named=True)}
    rows = []
    for name in set(ours) | set(theirs):
        (oc, ous, cus), (xc, xus) = ours.get(name, (None, None, None)), \
            theirs.get(name, (None, None))
        rows.append(KernelCheck(name, oc, xc, ous, xus, cus))
    return sorted(rows, key=lambda r: (r.agrees, r.name))


def clipped_total(rows: list[KernelCheck]) -> tuple[int, float]:
    """(how many kernel names the same-stream clip shortened, the µs it took from them)."""
    cut = [r.clipped_us for r in rows if r.clipped_us]
    return len(cut), sum(cut)  # type: ignore[arg-type]


def check_path(path: Path, load: Callable[[Path], Trace]
               ) -> tuple[list[KernelCheck], list[tuple[str, str]]]:
    """Every XSpace file behind ``path`` against XProf's ``kernel_stats`` of that file (one
    XProf run per file, as XProf reads one host's profile): the rows of all files (each
    names its file), disagreements first, and the files left out with why (other formats,
    files whose devices are all XLA:CPU). ``load`` reads one file as the command does. A
    single file that cannot be checked, or a folder where no file can be, is a
    :class:`TraceInputError` saying why."""
    files, left = xspace_files(path)
    rows: list[KernelCheck] = []
    checked = 0
    for f in files:
        trace = load(f)
        try:
            refuse_cpu_only(trace, f)
        except TraceInputError as exc:
            if not path.is_dir():
                raise
            left.append((f, exc.problem))
            continue
        name = label(f, path)
        rows += [replace(r, file=name) for r in compare_kernels(
            trace.events, xprof_kernel_stats(f), trace.meta.clips)]
        checked += 1
    if not checked:
        raise TraceInputError(path, f"no file xcheck can compare with XProf: {_listed(left, path)}")
    skipped = sorted((label(f, path), why) for f, why in left)
    return sorted(rows, key=lambda r: (r.agrees, r.file or "", r.name)), skipped
