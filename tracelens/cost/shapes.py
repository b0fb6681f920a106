"""FLOPs and bytes of an ATen op from its recorded shapes (PyTorch ``record_shapes=True``).

Format-independent: the inputs are what the PyTorch profiler records per op (``Input Dims``:
one shape per argument, ``Input type``: one dtype name per argument, ``Concrete Inputs``:
scalar arguments as strings). Only ops whose cost the shapes determine are costed; anything
missing or inconsistent gives None (unknown, counted by the caller), never a guess.

Conventions (docs/kineto.md §Costs): a multiply-add is 2 FLOPs; GEMM bytes are both operands
plus the output (and a bias when given) read/written once; attention forward is the two
batched GEMMs, ``2·B·H·Sq·Sk·(D + Dv)``, halved when causal (the convention AMD TraceLens
uses), and its backward 2.5 × the forward; grouped GEMMs (``_grouped_mm``) the whole
product the groups partition (:func:`_grouped`); convolution ``2·N·Cout·prod(out)·Cin/groups·
prod(kernel)``, its backward the forward once per requested gradient (input, weight).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import polars as pl

from tracelens.core.model import COSTED_ATEN_OPS, EVENT_SCHEMA, Notice, ShapeFacts, Trace

_DTYPES: dict[str, tuple[str, int]] = {
    "float": ("fp32", 4), "double": ("fp64", 8), "c10::half": ("fp16", 2),
    "c10::bfloat16": ("bf16", 2), "c10::float8_e4m3fn": ("fp8", 1),
    "c10::float8_e5m2": ("fp8", 1), "c10::float8_e4m3fnuz": ("fp8", 1),
    "c10::float8_e5m2fnuz": ("fp8", 1), "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1), "int": ("int32", 4), "long int": ("int64", 8),
}
# ScalarType codes (c10/core/ScalarType.h) that _scaled_mm's out_dtype can take -> bytes
_SCALAR_TYPE_BYTES = {5: 2, 6: 4, 7: 8, 15: 2, 23: 1, 24: 1, 25: 1, 26: 1}


@dataclass(frozen=True)
class ShapeCost:
    flops: float
    bytes: float | None
    dtype: str | None


# argument positions: (query index, causal index) per attention op
_ATTENTION = {
    "aten::scaled_dot_product_attention": (0, 5, False),
    "aten::_scaled_dot_product_flash_attention": (0, 4, False),
    "aten::_scaled_dot_product_efficient_attention": (0, 6, False),
    "aten::_scaled_dot_product_cudnn_attention": (0, 6, False),
    "aten::_scaled_dot_product_flash_attention_backward": (1, 11, True),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, 11, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": (1, 14, True),
}
_GEMM = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul",
         "aten::linear", "aten::_scaled_mm")
_CONV = ("aten::convolution", "aten::_convolution", "aten::convolution_backward")
COSTED_OPS: frozenset[str] = COSTED_ATEN_OPS
"""The ATen ops whose FLOPs come from their shapes (the model's list, which readers use to
keep their shapes: every one has a rule here, tests/test_shapecost.py checks it)."""


def _shape(dims: Sequence[Any], i: int) -> list[int] | None:
    if i >= len(dims) or not isinstance(dims[i], list):
        return None
    s = dims[i]
    return s if all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in s) \
        else None


def _dtype(types: Sequence[Any], i: int) -> tuple[str, int] | None:
    if i >= len(types) or not isinstance(types[i], str):
        return None
    return _DTYPES.get(types[i].strip().lower())


def _numel(s: list[int]) -> int:
    return math.prod(s) if s else 1


def _ints(text: Any) -> list[int] | None:
    if not isinstance(text, str) or not re.fullmatch(r"\s*\[?[\d,\s]*\]?\s*", text):
        return None
    vals = [int(x) for x in re.findall(r"\d+", text)]
    return vals or None


def _bool(text: Any) -> bool | None:
    return {"true": True, "false": False, "1": True, "0": False}.get(
        str(text).strip().lower()) if isinstance(text, (str, bool, int)) else None


def _matmul_dims(a: list[int], b: list[int]) -> tuple[int, int, int, int] | None:
    """(batch, M, N, K) of torch.matmul(a, b) with broadcasting, or None if inconsistent."""
    if not a or not b:
        return None
    a2 = [1, *a] if len(a) == 1 else a
    b2 = [*b, 1] if len(b) == 1 else b
    m, k = a2[-2], a2[-1]
    k2, n = b2[-2], b2[-1]
    if k != k2:
        return None
    ba, bb = a2[:-2], b2[:-2]
    batch = []
    for x, y in zip(reversed([1] * (len(bb) - len(ba)) + ba),
                    reversed([1] * (len(ba) - len(bb)) + bb)):
        if x != y and 1 not in (x, y):
            return None
        batch.append(max(x, y))
    return _numel(batch), m, n, k


def _gemm(name: str, dims: Sequence[Any], types: Sequence[Any], conc: Sequence[Any]
          ) -> ShapeCost | None:
    first = 1 if name in ("aten::addmm", "aten::baddbmm") else 0
    a, b = _shape(dims, first), _shape(dims, first + 1)
    dt = _dtype(types, first)
    if a is None or b is None or dt is None:
        return None
    if name == "aten::linear":
        if len(b) != 2 or not a or a[-1] != b[1]:
            return None
        batch, m, n, k = 1, _numel(a[:-1]), b[0], b[1]
    elif name in ("aten::mm", "aten::addmm", "aten::_scaled_mm") and (len(a) != 2 or len(b) != 2):
        return None
    elif name in ("aten::bmm", "aten::baddbmm") and (len(a) != 3 or len(b) != 3
                                                      or a[0] != b[0]):
        return None
    else:
        got = _matmul_dims(a, b)
        if got is None:
            return None
        batch, m, n, k = got
    if name != "aten::linear" and a[-1] != (b[-2] if len(b) > 1 else b[0]):
        return None
    flops = 2.0 * batch * m * n * k
    out_size: int | None = dt[1]
    if name == "aten::_scaled_mm":
        code = _ints(conc[6]) if len(conc) > 6 else None
        out_size = _SCALAR_TYPE_BYTES.get(code[0]) if code else dt[1]
    bias = 0
    if name in ("aten::addmm", "aten::baddbmm"):
        s = _shape(dims, 0)
        bias = _numel(s) if s else 0
    elif name == "aten::linear":
        s = _shape(dims, 2)
        bias = _numel(s) if s else 0
    if out_size is None:
        return ShapeCost(flops, None, dt[0])
    nbytes = (_numel(a) + _numel(b) + bias) * dt[1] + batch * m * n * out_size
    return ShapeCost(flops, float(nbytes), dt[0])


def _attention(name: str, dims: Sequence[Any], types: Sequence[Any], conc: Sequence[Any]
               ) -> ShapeCost | None:
    qi, ci, backward = _ATTENTION[name]
    q, k, v = _shape(dims, qi), _shape(dims, qi + 1), _shape(dims, qi + 2)
    dt = _dtype(types, qi)
    causal = _bool(conc[ci]) if ci < len(conc) else None
    if q is None or k is None or v is None or dt is None or causal is None:
        return None
    if len(q) != 4 or len(k) != 4 or len(v) != 4 or q[0] != k[0] or q[3] != k[3]:
        return None
    b, h, sq, d = q
    sk, dv = k[2], v[3]
    flops = 2.0 * b * h * sq * sk * (d + dv) * (0.5 if causal else 1.0)
    out = b * h * sq * dv
    io = _numel(q) + _numel(k) + _numel(v) + out
    if backward:
        return ShapeCost(2.5 * flops, float((io + out + _numel(q) + _numel(k) + _numel(v))
                                            * dt[1]), dt[0])
    return ShapeCost(flops, float(io * dt[1]), dt[0])


def _conv(name: str, dims: Sequence[Any], types: Sequence[Any], conc: Sequence[Any]
          ) -> ShapeCost | None:
    back = name == "aten::convolution_backward"
    xi = 1 if back else 0
    x, w = _shape(dims, xi), _shape(dims, xi + 1)
    dt = _dtype(types, xi)
    base = 4 if back else 3  # stride, padding, dilation, transposed, output_padding, groups
    if x is None or w is None or dt is None or len(conc) < base + 6:
        return None
    stride, pad, dil = (_ints(conc[base + i]) for i in range(3))
    transposed, groups = _bool(conc[base + 3]), _ints(conc[base + 5])
    nsp = len(x) - 2
    if (transposed is not False or not groups or stride is None or pad is None or dil is None
            or nsp < 1 or len(w) != len(x)):
        return None
    stride, pad, dil = ([v[0]] * nsp if len(v) == 1 else v for v in (stride, pad, dil))
    if len(stride) != nsp or len(pad) != nsp or len(dil) != nsp:
        return None
    out = [(x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) // stride[i] + 1
           for i in range(nsp)]
    if any(o <= 0 for o in out) or x[1] != w[1] * groups[0]:
        return None
    n, cout = x[0], w[0]
    fwd = 2.0 * n * cout * _numel(out) * w[1] * _numel(w[2:])
    y = n * cout * _numel(out)
    if not back:
        return ShapeCost(fwd, float((_numel(x) + _numel(w) + y) * dt[1]), dt[0])
    mask = re.findall(r"(?i)true|false", str(conc[10])) if len(conc) > 10 else []
    if len(mask) < 2:
        return None
    grads = sum(m.lower() == "true" for m in mask[:2])
    return ShapeCost(grads * fwd, float((_numel(x) + _numel(w) + y) * grads * dt[1]), dt[0])


_GROUPED = {"aten::_grouped_mm": (2, 4), "aten::_scaled_grouped_mm": (4, 7)}
"""MoE grouped GEMMs: (index of ``offs``, index of ``out_dtype``) in their arguments
(``_grouped_mm(a, b, offs, bias, out_dtype)``, ``_scaled_grouped_mm(a, b, scale_a, scale_b,
offs, bias, scale_result, out_dtype, ...)``)."""


def _grouped(name: str, dims: Sequence[Any], types: Sequence[Any], conc: Sequence[Any]
             ) -> ShapeCost | None:
    """``torch._grouped_mm`` (and its FP8 ``_scaled_`` form) from its operand shapes: the
    groups partition one dimension, so the FLOPs are those of the whole product, whatever
    the group sizes: a [ΣM, K] × b [G, K, N] (tokens sorted by expert) is 2·ΣM·K·N; a
    [G, M, K] × b [G, K, N] is 2·G·M·K·N; a [M, ΣK] × b [ΣK, N] (the weight gradient: G
    outputs [M, N]) is 2·M·ΣK·N. Other layouts: None (counted as not costed)."""
    offs_i, out_i = _GROUPED[name]
    a, b, dt = _shape(dims, 0), _shape(dims, 1), _dtype(types, 0)
    if a is None or b is None or dt is None:
        return None
    offs = _shape(dims, offs_i)
    if len(a) == 2 and len(b) == 3 and a[1] == b[1]:
        flops, out = 2.0 * a[0] * a[1] * b[2], a[0] * b[2]
    elif len(a) == 3 and len(b) == 3 and a[0] == b[0] and a[2] == b[1]:
        flops, out = 2.0 * a[0] * a[1] * a[2] * b[2], a[0] * a[1] * b[2]
    elif len(a) == 2 and len(b) == 2 and a[1] == b[0] and offs is not None and len(offs) == 1:
        flops, out = 2.0 * a[0] * a[1] * b[1], offs[0] * a[0] * b[1]
    else:
        return None
    code = _ints(conc[out_i]) if len(conc) > out_i else None
    if code:
        out_size = _SCALAR_TYPE_BYTES.get(code[0])
    else:  # no out_dtype: the result has the inputs' dtype (_grouped_mm); FP8 unknown
        out_size = dt[1] if name == "aten::_grouped_mm" else None
    if out_size is None:
        return ShapeCost(flops, None, dt[0])
    return ShapeCost(flops, float((_numel(a) + _numel(b)) * dt[1] + out * out_size), dt[0])


def op_cost(name: str, dims: Any, types: Any, concrete: Any) -> ShapeCost | None:
    """The cost of one execution of ATen op ``name`` from its recorded arguments, or None."""
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    conc = concrete if isinstance(concrete, list) else []
    if name in _ATTENTION:
        return _attention(name, dims, types, conc)
    if name in _GEMM:
        return _gemm(name, dims, types, conc)
    if name in _CONV:
        return _conv(name, dims, types, conc)
    if name in _GROUPED:
        return _grouped(name, dims, types, conc)
    return None


NO_SHAPES = "its ATen op has no recorded input shapes (record_shapes off?)"
BAD_SHAPES = "its ATen op's recorded shapes do not determine its FLOPs"
_COSTS = {c: EVENT_SCHEMA[c] for c in ("flops", "bytes", "dtype", "cost_source", "cost_note")}


def cost_shapes(trace: Trace) -> list[tuple[int, int, Notice]]:
    """The load stage of shape costs: ``flops``, ``bytes``, ``dtype``,
    ``cost_source`` ("shapes") and ``cost_note`` of each kernel a costed ATen op launched,
    from the op's recorded shapes the reader handed over (its
    :class:`~tracelens.core.model.ShapeFacts`, then dropped), right after reading: the op's cost
    on its longest kernel, 0 on its others. Returns the note counting the ops whose shapes
    give no cost, (where in the file's notices, rank, the notice), for
    :func:`tracelens.loading.devices.insert_notes`."""
    handed = trace.meta.facts(ShapeFacts)
    if not handed:
        return []
    trace.meta.format_facts = [f for f in trace.meta.format_facts
                               if not isinstance(f, ShapeFacts)]
    facts = handed[0].shapes  # one file's reader: one set of shapes
    memo: dict[Any, ShapeCost | None] = {}
    uids, flops, nbytes, dtypes, shaped = [], [], [], [], []
    for uid, (name, dims, types, concrete) in facts.ops.items():
        key = (name, repr(dims), repr(types), repr(concrete))
        if key not in memo:
            memo[key] = op_cost(name, dims, types, concrete)
        got = memo[key]
        uids.append(uid)
        shaped.append(bool(dims))
        flops.append(got.flops if got else None)
        nbytes.append(got.bytes if got else None)
        dtypes.append(got.dtype if got else None)
    unknown = sum(f is None for f in flops)
    ops = pl.DataFrame({"uid": uids, "c_flops": flops, "c_bytes": nbytes, "c_dtype": dtypes,
                        "c_shaped": shaped},
                       schema={"uid": pl.Int64, "c_flops": pl.Float64, "c_bytes": pl.Float64,
                               "c_dtype": pl.String, "c_shaped": pl.Boolean})
    if facts.kernels.height:
        _scatter(trace, facts.kernels.join(ops, on="uid", how="left", maintain_order="left"))
    if not unknown:
        return []
    note = Notice.of("cost.shapes_unknown", "{unknown} costed ATen ops (GEMM, attention, "
                     "convolution) have no usable Input Dims/Input type (record_shapes off?): "
                     "their kernels get no FLOPs", unknown=unknown)
    if trace.meta.sources:
        note = note.about(Path(trace.meta.sources[0]["path"]).name)
    return [(facts.notes_at, 0, note)]


def _scatter(trace: Trace, k: pl.DataFrame) -> None:
    """The cost columns of the kernels ``k`` (row, main, collective and their op's cost)
    written into ``trace.events`` at their rows."""
    main = pl.col("main")
    known = pl.col("c_flops").is_not_null()
    costs = k.select(
        flops=pl.when(known).then(pl.when(main).then(pl.col("c_flops")).otherwise(0.0)),
        bytes=pl.when(pl.col("c_bytes").is_not_null())
        .then(pl.when(main).then(pl.col("c_bytes")).otherwise(0.0)),
        cost_source=pl.when(known).then(pl.lit("shapes")),
        cost_note=pl.when(known).then(None)
        .when(~pl.col("c_shaped").fill_null(False)).then(pl.lit(NO_SHAPES))
        .otherwise(pl.lit(BAD_SHAPES)))
    ev = trace.events
    rows = k["row"]
    # a collective kernel's dtype is the collective's (the reader's), else the op's
    dtype = pl.DataFrame({"coll": k["collective"], "theirs": ev["dtype"].gather(rows),
                          "ops": k["c_dtype"]}).select(
        pl.when("coll").then("theirs").otherwise("ops"))[:, 0]
    cols = {name: ev[name].cast(dt).scatter(rows, costs[name].cast(dt))
            for name, dt in _COSTS.items() if name != "dtype"}
    cols["dtype"] = ev["dtype"].scatter(rows, dtype.cast(_COSTS["dtype"]))
    trace.events = ev.with_columns(**cols)
