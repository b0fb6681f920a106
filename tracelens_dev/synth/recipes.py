"""What each HLO op of the synthetic step program computes: its shapes, and its cost by
construction.

A *recipe* is one HLO instruction that kernels name (``hlo_op``): a cuBLAS/hipBLASLt GEMM
custom call, a Triton GEMM fusion, an attention custom call, a loop/input fusion with its body,
a sort, a copy or a collective, described by the array shapes the scenario chose (bf16
activations and weights, f32 statistics). :mod:`tracelens_dev.synth.hlo` serializes the recipes
into the program's ``xla.HloProto``; :meth:`cost` is the ground truth of one execution, written
#cost-model and #collectives (docs/cost-model.md §3-4), never
here from the construction with the rules of docs/definitions.md
by ``tracelens.hlo``:

- GEMMs (custom call or Triton fusion): FLOPs ``2·batch·M·N·K``; bytes = lhs + rhs + result
  (the custom call's ``s8`` workspace is scratch, not data);
- cuDNN fused attention: the two batched matmuls ``2·B·N·S·S·H`` each, × 2.5 backward, × ½
  causal; bytes = operands + results without the ``u8`` workspace. Transformer Engine (CK on
  ROCm) custom calls: the same FLOPs when their attributes carry the shape (``te_full``), else
  unknown (null); bytes = operands + every result;
- fusions: FLOPs = one per element of every arithmetic instruction of the body (a ``reduce``:
  input − output elements per reducer add), written out per fusion below; bytes = operands +
  result;
- sort and copy: no arithmetic (0 FLOPs), bytes = operands + result;
- collectives: message bytes (all-gather: the gathered result; the others: the operand) and
  group size; no FLOPs or bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any

WIDTH = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "s32": 4, "f32": 4, "u64": 8}


@dataclass(frozen=True)
class Arr:
    """An array: element type and dimensions (row-major)."""

    dtype: str
    dims: tuple[int, ...] = ()

    @property
    def elements(self) -> int:
        return prod(self.dims)

    @property
    def nbytes(self) -> int:
        return self.elements * WIDTH[self.dtype]

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(str(d) for d in self.dims)}]"


Shape = Any  # an Arr, or a tuple of Shapes (an HLO tuple)


def leaves(shape: Shape) -> list[Arr]:
    return [shape] if isinstance(shape, Arr) else [a for s in shape for a in leaves(s)]


def shape_str(shape: Shape) -> str:
    return str(shape) if isinstance(shape, Arr) else "(" + ", ".join(map(shape_str, shape)) + ")"


def bf16(*dims: int) -> Arr:
    return Arr("bf16", tuple(dims))


def f32(*dims: int) -> Arr:
    return Arr("f32", tuple(dims))


@dataclass(frozen=True)
class In:
    """An operand: its array, and whether it is a weight (a fresh entry parameter) rather than
    an activation (the latest value of that shape the program computed)."""

    arr: Arr
    weight: bool = False


@dataclass(frozen=True)
class Cost:
    """One execution of an op: what ``tracelens.load`` must put on its main kernel."""

    flops: int | None = None
    bytes: int | None = None
    msg_bytes: int | None = None
    group_size: int | None = None
    dtype: str | None = None  # compute dtype of model ops whose FLOPs are known


@dataclass
class Recipe:
    op: str  # the instruction name, = the kernels' hlo_op

    kind = "op"

    def inputs(self) -> list[In]:
        raise NotImplementedError

    def result(self) -> Shape:
        raise NotImplementedError

    def cost(self) -> Cost:
        raise NotImplementedError

    def describe(self) -> str:
        ins = ", ".join(str(i.arr) for i in self.inputs())
        return f"{shape_str(self.result())} <- ({ins})"


# -- GEMMs ----------------------------------------------------------------------------------


@dataclass
class Gemm(Recipe):
    """``C[B,M,N] = A·B`` as a library custom call (``target``) or a Triton GEMM fusion.

    ``use`` picks the operand layouts a training step has for a weight W[K,N] of a forward
    ``x[M,K]·W``: ``fwd`` A[M,K]·B[K,N]; ``dgrad`` (dx = dy·Wᵀ) A[M,K]·B[N,K] contracting both
    last dims; ``wgrad`` (dW = xᵀ·dy) A[K,M]·B[K,N] contracting both first dims. Batch dims
    (``batch`` > 1, the experts of an MoE layer) lead every operand.
    """

    use: str = "fwd"
    m: int = 1
    n: int = 1
    k: int = 1
    batch: int = 1
    target: str = "__cublas$gemm"
    triton: bool = False
    workspace: int = 0  # bytes of the custom call's s8 scratch result

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "triton-gemm" if self.triton else "gemm"

    def _b(self) -> tuple[int, ...]:
        return (self.batch,) if self.batch > 1 else ()

    def operands(self) -> tuple[Arr, Arr]:
        b, m, n, k = self._b(), self.m, self.n, self.k
        if self.use == "fwd":
            return bf16(*b, m, k), bf16(*b, k, n)
        if self.use == "dgrad":
            return bf16(*b, m, k), bf16(*b, n, k)
        return bf16(*b, k, m), bf16(*b, k, n)

    def dims(self) -> tuple[list[int], list[int], list[int], list[int]]:
        """(lhs contracting, rhs contracting, lhs batch, rhs batch)."""
        nb = len(self._b())
        lc, rc = {"fwd": (1, 0), "dgrad": (1, 1), "wgrad": (0, 0)}[self.use]
        return [nb + lc], [nb + rc], list(range(nb)), list(range(nb))

    def out(self) -> Arr:
        return bf16(*self._b(), self.m, self.n)

    def inputs(self) -> list[In]:
        a, w = self.operands()
        return [In(a), In(w, weight=self.use != "wgrad")]

    def result(self) -> Shape:
        if self.triton:
            return self.out()
        return (self.out(), Arr("s8", (self.workspace,)))

    def cost(self) -> Cost:
        b, m, n, k = self.batch, self.m, self.n, self.k
        return Cost(flops=2 * b * m * n * k, bytes=2 * b * (m * k + k * n + m * n),
                    dtype="bf16")

    def describe(self) -> str:
        return (f"{'Triton ' if self.triton else self.target + ' '}{self.use} "
                f"M={self.m} N={self.n} K={self.k} batch={self.batch}: " + super().describe())


# -- attention ------------------------------------------------------------------------------


@dataclass
class Attention(Recipe):
    """Causal flash attention on Q[B,S,N,H], K/V[B,S,Nkv,H] (BSNH, grouped-query).

    ``cudnn``: ``__cudnn$fmhaSoftmax[Backward]`` with the bmm dimension numbers in its backend
    config (the cost model knows it); otherwise Transformer Engine's
    ``te_fused_attn_{forward,backward}_ffi`` (CK kernels on ROCm), whose FLOPs the model knows
    only from the shape attributes TE writes (``te_full``).
    """

    backward: bool = False
    cudnn: bool = False
    b: int = 1
    s: int = 1
    heads: int = 1
    kv_heads: int = 1
    hd: int = 1
    workspace: int = 0
    te_full: bool = False

    kind = "attention"

    def target(self) -> str:
        if self.cudnn:
            return "__cudnn$fmhaSoftmaxBackward" if self.backward else "__cudnn$fmhaSoftmax"
        return "te_fused_attn_backward_ffi" if self.backward else "te_fused_attn_forward_ffi"

    def _arrs(self) -> dict[str, Arr]:
        q = bf16(self.b, self.s, self.heads, self.hd)
        kv = bf16(self.b, self.s, self.kv_heads, self.hd)
        return {"q": q, "kv": kv, "stats": f32(self.b, self.heads, self.s, 1),
                "rng": Arr("u64", (2,)), "ws": Arr("u8", (self.workspace,))}

    def inputs(self) -> list[In]:
        a = self._arrs()
        q, kv = a["q"], a["kv"]
        if not self.backward:
            return [In(q), In(kv), In(kv)]
        if self.cudnn:  # q, k, v, softmax stats, d_output, output
            return [In(q), In(kv), In(kv), In(a["stats"]), In(q), In(q)]
        return [In(q), In(kv), In(kv), In(q), In(q), In(a["stats"]), In(a["rng"])]

    def result(self) -> Shape:
        a = self._arrs()
        q, kv = a["q"], a["kv"]
        if self.cudnn:
            return (q, kv, kv, a["ws"]) if self.backward else (q, a["stats"], a["ws"])
        return (q, kv, kv) if self.backward else (q, a["stats"], a["rng"])

    def cost(self) -> Cost:
        ops = sum(i.arr.nbytes for i in self.inputs())
        res = leaves(self.result())
        both = 2 * (2 * self.b * self.heads * self.s * self.s * self.hd)  # Q·Kᵀ and P·V
        full = both * 5 // 2 if self.backward else both  # backward: five matmuls
        if not self.cudnn:  # TE: FLOPs (and the dtype) known only from its shape attributes
            if not self.te_full:
                return Cost(flops=None, bytes=ops + sum(r.nbytes for r in res))
            return Cost(flops=full // 2, bytes=ops + sum(r.nbytes for r in res), dtype="bf16")
        return Cost(flops=full // 2,  # causal: half the score matrix
                    bytes=ops + sum(r.nbytes for r in res[:-1]), dtype="bf16")

    def describe(self) -> str:
        return f"{self.target()} causal: " + super().describe()


# -- fusions --------------------------------------------------------------------------------


@dataclass
class Body:
    """A fused computation: instructions ``(local, opcode, shape, operand locals, attrs)``;
    the last one is the root. Attributes: ``dimensions``, ``to_apply`` (a reducer key of
    :mod:`tracelens_dev.synth.hlo`), ``slices`` [(start, limit)], ``dot`` (lhs_c, rhs_c, lhs_b,
    rhs_b), ``value`` (a constant)."""

    insts: list[tuple[str, str, Shape, tuple[str, ...], dict]] = field(default_factory=list)
    params: int = 0

    def param(self, arr: Arr) -> str:
        self.params += 1
        return self._add("parameter", arr, (), {"parameter_number": self.params - 1})

    def __call__(self, opcode: str, shape: Shape, *operands: str, **attrs: Any) -> str:
        return self._add(opcode, shape, operands, attrs)

    def _add(self, opcode: str, shape: Shape, operands: tuple[str, ...], attrs: dict) -> str:
        local = f"v{len(self.insts)}"
        self.insts.append((local, opcode, shape, operands, attrs))
        return local

    @property
    def root_shape(self) -> Shape:
        return self.insts[-1][2]


@dataclass
class Fusion(Recipe):
    fusion_kind: str = "kLoop"
    operands: tuple[In, ...] = ()
    body: Body = field(default_factory=Body)
    flops: int = 0  # counted by hand for the body (see each factory)

    kind = "fusion"

    def inputs(self) -> list[In]:
        return list(self.operands)

    def result(self) -> Shape:
        return self.body.root_shape

    def cost(self) -> Cost:
        nbytes = sum(i.arr.nbytes for i in self.operands) + \
            sum(a.nbytes for a in leaves(self.result()))
        return Cost(flops=self.flops, bytes=nbytes)

    def describe(self) -> str:
        return f"fusion {self.fusion_kind}: " + super().describe()


def _bcast(b: Body, x: str, out: Arr, dims: tuple[int, ...]) -> str:
    return b("broadcast", out, x, dimensions=list(dims))


def rmsnorm_fwd(op: str, t: int, h: int) -> Fusion:
    """y = x · rsqrt(Σx²) · γ per row. FLOPs: x² (t·h), Σ (t·h − t), rsqrt (t), two
    multiplies (2·t·h) = 4·t·h."""
    b = Body()
    x, g = b.param(bf16(t, h)), b.param(bf16(h))
    xc = b("convert", f32(t, h), x)
    sq = b("multiply", f32(t, h), xc, xc)
    ss = b("reduce", f32(t), sq, b("constant", f32(), value=0.0), dimensions=[1],
           to_apply="add_f32")
    r = b("rsqrt", f32(t), ss)
    y = b("multiply", f32(t, h), xc, _bcast(b, r, f32(t, h), (0,)))
    gb = _bcast(b, b("convert", f32(h), g), f32(t, h), (1,))
    b("convert", bf16(t, h), b("multiply", f32(t, h), y, gb))
    return Fusion(op, "kInput", (In(bf16(t, h)), In(bf16(h), weight=True)), b, 4 * t * h)


def rmsnorm_bwd(op: str, t: int, h: int) -> Fusion:
    """dx = a − x·Σ(a·x) with a = dy·γ. FLOPs: 2 multiplies (2·t·h), Σ (t·h − t), multiply
    and subtract (2·t·h) = 5·t·h − t."""
    b = Body()
    dy, x, g = b.param(bf16(t, h)), b.param(bf16(t, h)), b.param(bf16(h))
    dyc, xc = b("convert", f32(t, h), dy), b("convert", f32(t, h), x)
    gb = _bcast(b, b("convert", f32(h), g), f32(t, h), (1,))
    a = b("multiply", f32(t, h), dyc, gb)
    ax = b("multiply", f32(t, h), a, xc)
    s = b("reduce", f32(t), ax, b("constant", f32(), value=0.0), dimensions=[1],
          to_apply="add_f32")
    d = b("multiply", f32(t, h), xc, _bcast(b, s, f32(t, h), (0,)))
    b("convert", bf16(t, h), b("subtract", f32(t, h), a, d))
    return Fusion(op, "kInput", (In(bf16(t, h)), In(bf16(t, h)), In(bf16(h), weight=True)),
                  b, 5 * t * h - t)


def loss(op: str, t: int, h: int) -> Fusion:
    """Squared-error loss and its gradient: (Σ(x − y)², 2(x − y)). FLOPs: subtract,
    square (2·t·h), Σ over everything (t·h − 1), doubling (t·h) = 4·t·h − 1."""
    b = Body()
    x, y = b.param(bf16(t, h)), b.param(bf16(t, h))
    d = b("subtract", f32(t, h), b("convert", f32(t, h), x), b("convert", f32(t, h), y))
    sq = b("multiply", f32(t, h), d, d)
    total = b("reduce", f32(), sq, b("constant", f32(), value=0.0), dimensions=[0, 1],
              to_apply="add_f32")
    grad = b("convert", bf16(t, h), b("add", f32(t, h), d, d))
    b("tuple", (f32(), bf16(t, h)), total, grad)
    return Fusion(op, "kInput", (In(bf16(t, h)), In(bf16(t, h))), b, 4 * t * h - 1)


def rope(op: str, bsz: int, s: int, nq: int, hd: int) -> Fusion:
    """Rotary embedding of the fused Q/K/V heads: x·cos + x·sin with [S,H] tables broadcast.
    FLOPs: two multiplies and an add per element = 3·B·S·Nq·H."""
    x4 = (bsz, s, nq, hd)
    b = Body()
    x, cos, sin = b.param(bf16(*x4)), b.param(f32(s, hd)), b.param(f32(s, hd))
    xc = b("convert", f32(*x4), x)
    a = b("multiply", f32(*x4), xc, _bcast(b, cos, f32(*x4), (1, 3)))
    c = b("multiply", f32(*x4), xc, _bcast(b, sin, f32(*x4), (1, 3)))
    b("convert", bf16(*x4), b("add", f32(*x4), a, c))
    return Fusion(op, "kLoop", (In(bf16(*x4)), In(f32(s, hd), weight=True),
                                In(f32(s, hd), weight=True)), b, 3 * prod(x4))


def residual_add(op: str, t: int, h: int) -> Fusion:
    """bf16 add (convert, convert, add, convert). FLOPs: t·h."""
    b = Body()
    x, y = b.param(bf16(t, h)), b.param(bf16(t, h))
    s = b("add", f32(t, h), b("convert", f32(t, h), x), b("convert", f32(t, h), y))
    b("convert", bf16(t, h), s)
    return Fusion(op, "kLoop", (In(bf16(t, h)), In(bf16(t, h))), b, t * h)


def _halves(b: Body, gu: str, lead: tuple[int, ...], f: int) -> tuple[str, str]:
    full = [(0, d) for d in lead]
    gate = b("slice", bf16(*lead, f), gu, slices=full + [(0, f)])
    up = b("slice", bf16(*lead, f), gu, slices=full + [(f, 2 * f)])
    return b("convert", f32(*lead, f), gate), b("convert", f32(*lead, f), up)


def swiglu_fwd(op: str, lead: tuple[int, ...], f: int) -> Fusion:
    """silu(gate)·up on the two halves of the gate/up projection. FLOPs: logistic and two
    multiplies = 3 per output element."""
    b = Body()
    gu = b.param(bf16(*lead, 2 * f))
    g, u = _halves(b, gu, lead, f)
    sig = b("logistic", f32(*lead, f), g)
    y = b("multiply", f32(*lead, f), b("multiply", f32(*lead, f), g, sig), u)
    b("convert", bf16(*lead, f), y)
    return Fusion(op, "kLoop", (In(bf16(*lead, 2 * f)),), b, 3 * prod(lead) * f)


def swiglu_bwd(op: str, lead: tuple[int, ...], f: int) -> Fusion:
    """Gradients of gate and up, concatenated. FLOPs: logistic and four multiplies = 5 per
    element of one half."""
    b = Body()
    dy, gu = b.param(bf16(*lead, f)), b.param(bf16(*lead, 2 * f))
    g, u = _halves(b, gu, lead, f)
    dyc = b("convert", f32(*lead, f), dy)
    sig = b("logistic", f32(*lead, f), g)
    du = b("multiply", f32(*lead, f), dyc, b("multiply", f32(*lead, f), g, sig))
    dg = b("multiply", f32(*lead, f), b("multiply", f32(*lead, f), dyc, u), sig)
    b("concatenate", bf16(*lead, 2 * f), b("convert", bf16(*lead, f), dg),
      b("convert", bf16(*lead, f), du), dimensions=[len(lead)])
    return Fusion(op, "kLoop", (In(bf16(*lead, f)), In(bf16(*lead, 2 * f))), b,
                  5 * prod(lead) * f)


def sum_of_squares(op: str, n: int) -> Fusion:
    """Gradient-norm partial: Σg² over the local gradient shard. FLOPs: n + (n − 1)."""
    b = Body()
    g = b("convert", f32(n), b.param(bf16(n)))
    b("reduce", f32(), b("multiply", f32(n), g, g), b("constant", f32(), value=0.0),
      dimensions=[0], to_apply="add_f32")
    return Fusion(op, "kInput", (In(bf16(n)),), b, 2 * n - 1)


def adam_moment(op: str, n: int) -> Fusion:
    """m · g (first-moment update, simplified). FLOPs: n."""
    b = Body()
    m, g = b.param(f32(n)), b.param(bf16(n))
    b("multiply", f32(n), m, b("convert", f32(n), g))
    return Fusion(op, "kLoop", (In(f32(n), weight=True), In(bf16(n))), b, n)


def adam_second_moment(op: str, n: int) -> Fusion:
    """v + g² (second-moment update, simplified). FLOPs: 2·n."""
    b = Body()
    v, g = b.param(f32(n)), b.param(bf16(n))
    gc = b("convert", f32(n), g)
    b("add", f32(n), v, b("multiply", f32(n), gc, gc))
    return Fusion(op, "kLoop", (In(f32(n), weight=True), In(bf16(n))), b, 2 * n)


def adam_update(op: str, n: int) -> Fusion:
    """w − m · rsqrt(v). FLOPs: rsqrt, multiply, subtract = 3·n."""
    b = Body()
    w, m, v = b.param(bf16(n)), b.param(f32(n)), b.param(f32(n))
    u = b("multiply", f32(n), m, b("rsqrt", f32(n), v))
    b("convert", bf16(n), b("subtract", f32(n), b("convert", f32(n), w), u))
    return Fusion(op, "kLoop", (In(bf16(n), weight=True), In(f32(n)), In(f32(n))), b, 3 * n)


# -- sort, copy -------------------------------------------------------------------------------


@dataclass
class Sort(Recipe):
    """Top-k routing: router scores sorted along the experts with their indices."""

    keys: Arr = field(default_factory=lambda: bf16(1, 1))

    kind = "sort"

    def values(self) -> Arr:
        return Arr("s32", self.keys.dims)

    def inputs(self) -> list[In]:
        return [In(self.keys), In(self.values())]

    def result(self) -> Shape:
        return (self.keys, self.values())

    def cost(self) -> Cost:
        return Cost(flops=0, bytes=2 * (self.keys.nbytes + self.values().nbytes))


@dataclass
class Copy(Recipe):
    arr: Arr = field(default_factory=lambda: bf16(1))

    kind = "copy"

    def inputs(self) -> list[In]:
        return [In(self.arr)]

    def result(self) -> Shape:
        return self.arr

    def cost(self) -> Cost:
        return Cost(flops=0, bytes=2 * self.arr.nbytes)


# -- collectives ------------------------------------------------------------------------------


@dataclass
class Collective(Recipe):
    """A collective among the devices of the job (``group`` "job", flattened device ids
    0..n−1) or of each host (``group`` "host": devices h·g .. h·g+g−1).

    ``sync`` ones are plain instructions (``all-reduce.N``, ``all-to-all.N``); asynchronous
    all-gather/all-reduce use XLA's ``*-start``/``*-done`` pairs and reduce-scatter an
    ``async-start`` wrapping ``reduce-scatter.N``. ``encoding`` says how the replica groups are
    written: ``iota`` (field 92), ``iota_transposed`` (92 with a reshape and transpose),
    ``list`` (87), ``explicit`` (49) or ``mesh`` (93, the host's GPUs as a mesh axis).
    """

    ctype: str = "all-reduce"
    operand: Arr = field(default_factory=lambda: bf16(1))
    out: Arr = field(default_factory=lambda: bf16(1))
    sync: bool = False
    group: str = "job"
    hosts: int = 1
    gpus: int = 1
    encoding: str = "iota"
    groups: tuple[tuple[int, ...], ...] | None = None  # explicit groups instead of ``group``

    kind = "collective"

    @property
    def group_size(self) -> int:
        if self.groups:
            return len(self.groups[0])
        return self.gpus if self.group == "host" else self.hosts * self.gpus

    def inputs(self) -> list[In]:
        return [In(self.operand)]

    def result(self) -> Shape:
        return self.out

    def cost(self) -> Cost:
        msg = self.out.nbytes if self.ctype == "all-gather" else self.operand.nbytes
        return Cost(msg_bytes=msg, group_size=self.group_size)

    def describe(self) -> str:
        return (f"{self.ctype} {'sync' if self.sync else 'async'} over {self.group_size} "
                f"({self.group}, {self.encoding} groups): " + super().describe())
