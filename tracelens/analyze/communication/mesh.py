"""Process groups to mesh axes: pure functions of small group lists, no frames.

Devices are numbered row-major over the mesh (outermost axis first), as ``jax.make_mesh``
and PyTorch's ``DeviceMesh`` lay them out: along an axis of stride s, neighbours' ids
differ by s; the innermost axis has stride 1. A group lies along the axes in which its
members' coordinates vary, when it holds every combination of them (a sub-grid); its axis
name joins theirs (``fsdp+tp``). Without a ``--mesh``, the mesh is inferred from the groups
seen: a group whose sorted ids step by s, n of them, is an axis of stride s and size n; the
axes are chained from stride 1 outwards, an axis no group lies along filling a gap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod
from typing import Iterable, Sequence

from tracelens.results.axes import MeshAxis

Group = tuple[int, ...]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_NOT_AXIS_NAMES = frozenset({"default_pg", "undefined", "world", "default"})


def parse_mesh(text: str) -> tuple[tuple[str, int], ...]:
    """``"dp=8,tp=8"`` as ((name, size), ...), outermost first; ValueError when malformed."""
    out: list[tuple[str, int]] = []
    for part in text.split(","):
        name, eq, size = part.strip().partition("=")
        if not eq or not _NAME.match(name.strip()) or not size.strip().isdigit() \
                or int(size) < 1:
            raise ValueError(f"mesh {text!r}: expected name=size,... (e.g. dp=8,tp=8)")
        out.append((name.strip(), int(size)))
    if len({n for n, _ in out}) != len(out):
        raise ValueError(f"mesh {text!r}: an axis name repeats")
    return tuple(out)


def parse_groups(text: str) -> tuple[Group, ...] | None:
    """The model's ``groups`` text (``"0,1;2,3"``) as tuples of ids; None when malformed."""
    try:
        groups = tuple(tuple(int(x) for x in g.split(",")) for g in text.split(";"))
    except ValueError:
        return None
    return groups if all(groups) else None


def own_group(groups: Sequence[Group], me: int, permute: bool) -> Group | None:
    """The group ``me`` takes part in. A collective-permute lists (source, target) pairs:
    its groups are the chains they link (pipeline stages 0→4→8→12 are one group)."""
    if permute:
        groups = chains(groups)
    for g in groups:
        if me in g:
            return tuple(sorted(set(g)))
    return None


def chains(pairs: Iterable[Group]) -> list[Group]:
    """The connected components of the pairs' ids (union-find), each sorted."""
    parent: dict[int, int] = {}

    def root(x: int) -> int:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for p in pairs:
        for a in p[1:]:
            parent[root(a)] = root(p[0])
        root(p[0])
    comps: dict[int, list[int]] = {}
    for x in parent:
        comps.setdefault(root(x), []).append(x)
    return [tuple(sorted(c)) for c in comps.values()]


def progression(group: Group) -> tuple[int, int] | None:
    """(stride, size) when the sorted ids step evenly (size >= 2), else None."""
    g = sorted(set(group))
    if len(g) < 2:
        return None
    step = g[1] - g[0]
    return (step, len(g)) if all(b - a == step for a, b in zip(g, g[1:])) else None


@dataclass(frozen=True)
class Mesh:
    """The axes outermost first (``MeshAxis``) and the number of devices they hold."""

    axes: tuple[MeshAxis, ...]

    @property
    def world(self) -> int:
        return prod(a.size for a in self.axes)

    def coords(self, i: int) -> tuple[int, ...]:
        return tuple((i // a.stride) % a.size for a in self.axes)

    def axes_of(self, group: Group) -> tuple[int, ...] | None:
        """The indices of the axes ``group`` lies along, or None when it is no sub-grid
        (a member outside the mesh, or not every combination of the varying coordinates)."""
        if any(i < 0 or i >= self.world for i in group):
            return None
        pts = {self.coords(i) for i in group}
        if len(pts) != len(group):
            return None
        vary = tuple(k for k in range(len(self.axes)) if len({p[k] for p in pts}) > 1)
        if len(pts) != prod(self.axes[k].size for k in vary):
            return None
        return vary


def given_mesh(spec: Sequence[tuple[str, int]], source: str = "mesh") -> Mesh:
    """The --mesh option's axes (or the HLO's, ``source="hlo"``; outermost first) with their
    strides."""
    axes, stride = [], 1
    for name, size in reversed(spec):
        axes.append(MeshAxis(name, size, stride, source, False))
        stride *= size
    return Mesh(tuple(reversed(axes)))


def inferred_mesh(groups: Iterable[Group], world: int) -> Mesh:
    """The mesh the groups' structure implies (module doc), axes named ``axis<i>`` from the
    outermost; ``world``: the devices the job numbers (the product is at least that)."""
    seen = {p for p in map(progression, groups) if p is not None}
    chain: list[tuple[int, int, bool]] = []  # (size, stride, observed), innermost first
    cur = 1
    while cur < world or (not chain and world > 1):
        here = sorted(n for s, n in seen if s == cur and n > 1)
        if here:
            chain.append((here[0], cur, True))
        else:
            larger = sorted(s for s, _ in seen if s > cur and s % cur == 0)
            size = larger[0] // cur if larger else -(-world // cur)
            chain.append((size, cur, False))
        cur *= chain[-1][0]
    chain.reverse()
    return Mesh(tuple(MeshAxis(f"axis{i}", size, stride, "inferred", observed)
                      for i, (size, stride, observed) in enumerate(chain)))


def named(mesh: Mesh, names: dict[int, set[str]]) -> Mesh:
    """``mesh`` with each inferred axis renamed to the one name the trace's process groups
    along it carry (PyTorch ``mesh_tp`` -> ``tp``), when that name is unique to the axis."""
    clean = {k: {n.removeprefix("mesh_") for n in v} for k, v in names.items()}
    clean = {k: next(iter(v)) for k, v in clean.items()
             if len(v) == 1 and _NAME.match(next(iter(v)))
             and next(iter(v)) not in _NOT_AXIS_NAMES}
    taken = list(clean.values())
    axes = []
    for k, a in enumerate(mesh.axes):
        n = clean.get(k)
        if a.source == "inferred" and n is not None and taken.count(n) == 1:
            axes.append(MeshAxis(n, a.size, a.stride, "trace", a.observed))
        else:
            axes.append(a)
    return Mesh(tuple(axes))


_SDY_KEY = b"xla.sdy.meshes"
_SDY_MESH = re.compile(r'#sdy\.mesh<\[((?:\s*"[^"]*"\s*=\s*\d+\s*,?)*)\]')
_SDY_AXIS = re.compile(r'"([^"]*)"\s*=\s*(\d+)')


def _varint(b: bytes, i: int) -> tuple[int, int]:
    out = shift = 0
    while i < len(b):
        out |= (b[i] & 0x7F) << shift
        i += 1
        if b[i - 1] < 0x80:
            break
        shift += 7
    return out, i


def sdy_meshes(hlo_proto: bytes) -> list[tuple[tuple[str, int], ...]]:
    """The named meshes JAX's Shardy partitioner records in an HLO module's frontend
    attributes (``xla.sdy.meshes`` = ``{mesh = #sdy.mesh<["data"=4, "model"=2]>}``, axes
    outermost first), read from the serialized proto: the map entry's value follows its key
    as a length-delimited field 2. Empty meshes and malformed text give nothing."""
    out: list[tuple[tuple[str, int], ...]] = []
    at = hlo_proto.find(_SDY_KEY)
    while at >= 0:
        i = at + len(_SDY_KEY)
        if i < len(hlo_proto) and hlo_proto[i] == 0x12:
            n, j = _varint(hlo_proto, i + 1)
            text = hlo_proto[j:j + n].decode("utf-8", "replace")
            for m in _SDY_MESH.finditer(text):
                axes = tuple((a, int(s)) for a, s in _SDY_AXIS.findall(m.group(1)))
                if axes and all(_NAME.match(a) for a, _ in axes) and axes not in out:
                    out.append(axes)
        at = hlo_proto.find(_SDY_KEY, at + 1)
    return out
