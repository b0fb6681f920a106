"""The ``tracelens xcheck`` result (its JSON is :func:`tracelens.to_json` of it, as
for every command): one row per file and kernel name, ours next to XProf's kernel_stats, what
the same-stream clip took, and the files of a folder not checked."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracelens.results import display
from tracelens.results.encode import rounded
from tracelens.analyze.xcheck import KernelCheck, clipped_total

US = rounded(3)


@dataclass(frozen=True)
class KernelRow:
    """One kernel name of one file: counts and total µs on each side (ours as read, before
    the same-stream clip; ``clipped_us`` what the clip took), and whether they agree."""

    file: str | None
    kernel: str
    ours_count: int | None
    xprof_count: int | None
    ours_us: float | None = field(metadata=US)
    clipped_us: float | None = field(metadata=US)
    xprof_us: float | None = field(metadata=US)
    agrees: bool


@dataclass(frozen=True)
class Clipped:
    """How many kernel names the same-stream clip shortened and the µs it took (``note``
    says why ours_us is compared before it; null when it took nothing)."""

    kernels: int
    us: float = field(metadata=US)
    note: str | None


@dataclass(frozen=True)
class Skipped:
    file: str
    reason: str


@dataclass(frozen=True)
class XCheck:
    """``kernels``: disagreements first; ``agree`` of ``total`` rows agree."""

    kernels: tuple[KernelRow, ...]
    agree: int
    total: int
    clipped: Clipped
    skipped: tuple[Skipped, ...]
    rows: tuple[KernelCheck, ...] = field(default=(), metadata={"json": False})

    # in a notebook: a screen or less (tracelens.results.display); the whole: to_dict()
    __repr__ = display.short_repr
    _repr_html_ = display.html_repr
    __rich__ = display.rich_table
    to_dict = display.to_dict


def clip_note(rows: "list[KernelCheck] | tuple[KernelCheck, ...]") -> str | None:
    """The sentence that says our times are compared before the same-stream clip, and what
    that clip took (None: it took nothing)."""
    names, us = clipped_total(list(rows))
    if not names:
        return None
    return (f"ours_us is as read, before the same-stream clip; the clip took {us:,.3f} µs "
            f"from {names} kernel name(s) (clipped_us), which every other command leaves out "
            "and XProf keeps")


def xcheck_result(rows: list[KernelCheck], skipped: list[tuple[str, str]]) -> XCheck:
    """The typed result of :func:`tracelens.analyze.xcheck.check_path`'s rows and skipped files."""
    names, us = clipped_total(rows)
    return XCheck(
        tuple(KernelRow(r.file, r.name, r.ours_count, r.xprof_count, r.ours_us, r.clipped_us,
                        r.xprof_us, r.agrees) for r in rows),
        sum(r.agrees for r in rows), len(rows), Clipped(names, us, clip_note(rows)),
        tuple(Skipped(f, why) for f, why in skipped), tuple(rows))
