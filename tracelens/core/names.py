"""Kernel names short enough for a person to read: C++ template names run to thousands of
characters and Tensile names to 640, yet a chart axis, a table cell or a warning needs a few
dozen that still tell kernels apart. Shared by the reports (charts) and the warnings the
analyses write, so a kernel reads the same everywhere."""

from __future__ import annotations

import re

_TENSILE = re.compile(r"(Cijk_.*?_MT\w+?_MI\d+(?:x\d+)+)_")
_TENSILE_HEAD = re.compile(r"(Cijk_[^_]+_[^_]+_[^_]+)_")  # Cijk_<A>_<B>_<types>
_TENSILE_TILE = re.compile(r"_(MT\w+?_MI\d+(?:x\d+)+)_")


def short(name: str, width: int) -> str:
    """Start and end of a long name, with ``…`` between (unchanged up to ``width``)."""
    if len(name) <= width:
        return name
    tail = width // 3
    return name[: width - tail - 1] + "…" + name[-tail:]


def collapse_templates(name: str, keep_depth: int = 1) -> str:
    """``a<b, c<d<e>>>`` -> ``a<b, c<…>>``: template arguments deeper than ``keep_depth``
    become ``…`` (names with unbalanced brackets are returned as they are)."""
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
            if depth == keep_depth + 1:
                out.append("<…")
            elif depth <= keep_depth:
                out.append(ch)
        elif ch == ">":
            if depth == 0:
                return name
            if depth <= keep_depth + 1:
                out.append(">")
            depth -= 1
        elif depth <= keep_depth:
            out.append(ch)
    return "".join(out) if depth == 0 else name


def drop_params(name: str) -> str:
    """Cut a trailing top-level parameter list: ``f<T>(int, float)`` -> ``f<T>``."""
    depth = 0
    for i, ch in enumerate(name):
        if ch in "<(":
            if ch == "(" and depth == 0 and i > 0:
                return name[:i]
            depth += 1
        elif ch in ">)":
            depth = max(depth - 1, 0)
    return name


def _cxx_core(name: str) -> str:
    """A C++ name without its return type, namespaces and nested template arguments."""
    s = re.sub(r"^(?:void|static|__global__)\s+", "", name)
    s = collapse_templates(s)
    return re.sub(r"\b[A-Za-z_]\w*::|\(anonymous namespace\)::", "", s)


def chart_name(name: str, width: int) -> str:
    """A kernel name for a chart axis: Tensile names keep their tile (``MT…_MI…``), C++
    names lose the return type, namespaces, nested template arguments and, when still too
    long, their parameters; then :func:`short`. Hover and tables show the full name."""
    if len(name) <= width:
        return name
    m = _TENSILE.match(name)
    if m:
        return short(f"{m.group(1)}…{name.rsplit('_', 1)[-1]}", width)
    s = _cxx_core(name)
    if len(s) > width:
        s = drop_params(s)
    return short(s, width)


def brief_name(name: str, width: int = 48) -> str:
    """A kernel name for a sentence (a warning): C++ names as the function and its first
    template level, or none when that is still too long
    (``paged_attention_ll4mi_QKV_mfma16_kernel<…>``), no parameters; Tensile names
    as their operand layouts, types and tile (``Cijk_Alik_Bljk_BBS…MT256x32x64_MI16x16x1``);
    then :func:`short`. Names up to ``width`` characters stay as they are."""
    if len(name) <= width:
        return name
    head, tile = _TENSILE_HEAD.match(name), _TENSILE_TILE.search(name)
    if head and tile:
        return short(f"{head.group(1)}…{tile.group(1)}", width)
    s = drop_params(_cxx_core(name))
    if len(s) > width:
        s = collapse_templates(s, keep_depth=0)
    return short(s, width)
