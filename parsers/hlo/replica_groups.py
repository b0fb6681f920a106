"""Replica groups in all four encodings, expanded to explicit lists of ids (how many devices
one instance spans is the cost model's: :mod:`tracelens.cost.groups`).

Encodings (shared/reference/hlo.md §0.2, §3, §5): explicit ``replica_groups`` (field 49,
deprecated), ``collective_device_list`` (87: a list, or until 2026-02 a nested iota at 87.2),
``iota_collective_device_list`` (92) and ``mesh_axes_replica_group_list`` (93). Readers try
49 if non-empty → 92 → 93 → 87 (``CollectiveDeviceList::FromProto``).

Iota: ``arange(prod(reshape_dims)).reshape(reshape_dims).transpose(perm)`` flattened and cut
into ``num_groups`` groups of ``devices_per_group``. Mesh axes: the device array (explicit ids,
or iota with an optional reshape/transpose) shaped by the mesh axis sizes; each referenced
(sub-)axis is a grouped dimension; non-grouped dims first, grouped dims last in ``axes`` order,
flattened and cut into groups of the grouped sizes' product.
"""

from __future__ import annotations

from math import prod
from typing import Sequence


def _transpose_flat(values: Sequence[int], dims: Sequence[int], perm: Sequence[int]) -> list[int]:
    """Row-major ``values`` of shape ``dims`` transposed by ``perm``, flattened."""
    dims = list(dims)
    if not dims:
        return list(values)
    strides = [prod(dims[i + 1:]) for i in range(len(dims))]
    out_dims = [dims[p] for p in perm]
    out_strides = [strides[p] for p in perm]
    result = []
    for flat in range(prod(out_dims)):
        src, rem = 0, flat
        for size, stride in zip(reversed(out_dims), reversed(out_strides)):
            rem, idx = divmod(rem, size)
            src += idx * stride
        result.append(values[src])
    return result


def iota_groups(num_groups: int, per_group: int, reshape_dims: Sequence[int] = (),
                transpose_perm: Sequence[int] = ()) -> list[list[int]]:
    """Groups of an iota replica-group list (``[G,S]<=[dims]T(perm)`` in HLO text)."""
    total = num_groups * per_group
    dims = list(reshape_dims) or [total]
    if prod(dims) != total:
        raise ValueError(f"iota reshape dims {dims} do not hold {num_groups}×{per_group} ids")
    perm = list(transpose_perm) or list(range(len(dims)))
    flat = _transpose_flat(list(range(total)), dims, perm)
    return [flat[g * per_group:(g + 1) * per_group] for g in range(num_groups)]


def mesh_axes_groups(axis_sizes: Sequence[int], refs: Sequence[tuple[int, int | None, int | None]],
                     device_ids: Sequence[int] = (), iota_reshape: Sequence[int] = (),
                     iota_perm: Sequence[int] = ()) -> list[list[int]]:
    """Groups of a mesh-axes replica-group list.

    ``refs``: (mesh axis index, sub-axis pre_size or None, sub-axis size or None) per
    ``AxisRefProto`` in ``axes`` order.
    """
    n = prod(axis_sizes)
    if device_ids:
        devices = list(device_ids)
    elif iota_reshape:
        devices = _transpose_flat(list(range(n)), iota_reshape,
                                  list(iota_perm) or list(range(len(iota_reshape))))
    else:
        devices = list(range(n))
    if len(devices) != n:
        raise ValueError(f"mesh of {n} devices lists {len(devices)} device ids")
    # Split each axis at the sub-axis boundaries it is referenced with.
    cuts: dict[int, set[int]] = {}
    for axis, pre, size in refs:
        if pre is not None and size is not None:
            cuts.setdefault(axis, set()).update({pre, pre * size})
    dims: list[int] = []
    pieces: dict[int, list[tuple[int, int]]] = {}  # axis -> [(dim index, boundary before it)]
    for axis, full in enumerate(axis_sizes):
        points = sorted({1, full} | cuts.get(axis, set()))
        pieces[axis] = []
        for lo, hi in zip(points, points[1:]):
            if hi % lo:
                raise ValueError(f"sub-axis boundaries {points} do not divide axis size {full}")
            pieces[axis].append((len(dims), lo))
            dims.append(hi // lo)
        if len(points) == 1:  # axis of size 1
            pieces[axis].append((len(dims), 1))
            dims.append(1)
    grouped: list[int] = []
    for axis, pre, size in refs:
        if axis >= len(axis_sizes):
            raise ValueError(f"axis index {axis} outside a {len(axis_sizes)}-axis mesh")
        lo, hi = (pre, pre * size) if pre is not None and size is not None else (
            1, axis_sizes[axis])
        grouped += [d for d, start in pieces[axis] if lo <= start < hi]
    rest = [d for d in range(len(dims)) if d not in grouped]
    flat = _transpose_flat(devices, dims, rest + grouped)
    per_group = prod(dims[d] for d in grouped) if grouped else 1
    return [flat[i:i + per_group] for i in range(0, len(flat), per_group)]
