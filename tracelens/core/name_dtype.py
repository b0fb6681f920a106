"""The compute dtype of a GEMM kernel from its name, where the library's naming says it.

Used only when the trace gives no better source (the HLO's shapes, the ATen op's input types,
hardware counters): FP8/MXFP GEMMs of Kineto and rocprofv3 traces then meet their own peak in
the roofline and MFU instead of none. A name that does not spell out its operand types, or spells
a mix no single peak describes, gives null (unknown), never a guess. The dtype is what the matrix
units run, i.e. the A/B operand type, not the output's:

- hipBLASLt/Tensile ``Cijk_A.._B.._<Ti>[<To><Tc>]_``: ``BBS`` bf16 in, bf16 out, fp32 compute;
  ``HHS``/``HSS`` fp16; ``F8``/``B8`` (OCP E4M3/E5M2), ``F8N``/``B8N`` (FNUZ), ``F8B8``/``B8F8``
  fp8; ``I8``/``4xi8`` int8; ``S``/``SB`` fp32, ``S`` with ``_MX_`` (xf32 math) tf32; ``D`` fp64.
- trtllm-gen (TensorRT-LLM/FlashInfer) ``bmm_<C>_<A><B>_<acc>_`` and ``gemm_<C>_<A><B>_..``
  (``GemmKernel_<C>_<Elt>_<acc>`` when A and B share one type): E2m1 × E2m1 (MX or not) fp4;
  any other pair of 8-, 6- or 4-bit floats fp8 (Blackwell runs mixed f8f6f4 operands at the
  fp8 rate); Bfloat16/Fp16 pairs bf16/fp16; a 16-bit × low-bit mix null.
- cuBLAS ``xmma_gemm_<a><b>_`` (``bf16bf16``, ``f16f16``, ``e4m3e4m3``, ``tf32tf32``, ...), and
  the SIMT/tensor-core prefixes ``sgemm`` fp32, ``dgemm`` fp64, ``hgemm``/``h884gemm`` fp16,
  ``ampere_bf16_s16816gemm`` bf16, CUTLASS's ``tensorop_s1688gemm`` tf32 (16x8x8 fp32-operand
  MMA is the TF32 instruction).
"""

from __future__ import annotations

import polars as pl

_TENSILE = r"^(?:Custom_)?Cijk_A[A-Za-z]+_B[A-Za-z]+_"
# (regex on the name, dtype), first match wins
_PATTERNS: tuple[tuple[str, str], ...] = (
    (_TENSILE + r"(?:F8B8|B8F8|F8|B8)N?(?:S|H|B|F8N?|B8N?)S_", "fp8"),
    (_TENSILE + r"(?:I8|4xi8)(?:I|I8|H|B|S)?(?:I|S)?_", "int8"),
    (_TENSILE + r"B(?:B|S|H)S_", "bf16"),
    (_TENSILE + r"H(?:H|S)S_|" + _TENSILE + r"HB?H?_", "fp16"),
    (_TENSILE + r"SB?H?_MX_", "tf32"),
    (_TENSILE + r"(?:SSS|SB?H?)_", "fp32"),
    (_TENSILE + r"DB?_", "fp64"),
    (r"xmma_gemm_(?:e4m3|e5m2)(?:e4m3|e5m2)_", "fp8"),
    (r"xmma_gemm_bf16bf16_", "bf16"),
    (r"xmma_gemm_f16f16_", "fp16"),
    (r"xmma_gemm_tf32tf32_", "tf32"),
    (r"xmma_gemm_f32f32_", "fp32"),
    (r"xmma_gemm_f64f64_", "fp64"),
    (r"xmma_gemm_(?:i8i8|s8s8)_", "int8"),
    (r"(?:^|[^a-z0-9])(?:ampere|turing|hopper|sm\d+)_bf16_s\d+gemm", "bf16"),
    (r"(?:^|[^a-z0-9])(?:ampere|turing|hopper|sm\d+)_fp16_s\d+gemm|(?:^|[^a-z0-9])volta_s884gemm_fp16",
     "fp16"),
    (r"tensorop_s1688(?:tf32)?gemm", "tf32"),
    (r"(?:^|[^a-z0-9])h\d{3,5}gemm|(?:^|[^a-z0-9])hgemm", "fp16"),
    (r"(?:^|[^a-z0-9])sgemm", "fp32"),
    (r"(?:^|[^a-z0-9])dgemm", "fp64"),
)
# trtllm-gen operand tokens -> operand class
_TRTLLM = r"^(?:void\s+)?(?:bmm|gemm|gemmGatedAct)_(?:Mx)?(?:E\dm\d|Bfloat16|Fp16|Fp32)_"
_OPERAND = r"(Mx)?(E\dm\d|Bfloat16|Fp16|Fp32)"
_CLASS = {"E2m1": "f4", "E4m3": "f8", "E5m2": "f8", "E2m3": "f6", "E3m2": "f6",
          "Bfloat16": "bf16", "Fp16": "fp16", "Fp32": "fp32"}


def _trtllm_gen(name: pl.Expr) -> pl.Expr:
    """``bmm_<C>_<A><B>_<acc>``: the A/B pair decides; ``GemmKernel_<C>_<Elt>_<acc>`` too."""
    ab = name.str.extract_groups(_TRTLLM + r"(?P<a>(?:Mx)?(?:E\dm\d|Bfloat16|Fp16|Fp32))"
                                 r"(?P<b>(?:Mx)?(?:E\dm\d|Bfloat16|Fp16|Fp32))_")
    elt = name.str.extract(r"^(?:void\s+)?Gemm(?:GatedAct)?Kernel_(?:E\dm\d|Bfloat16|Fp16|Fp32)"
                           r"_((?:Mx)?(?:E\dm\d|Bfloat16|Fp16|Fp32))_Fp32_", 1)
    a = pl.coalesce(ab.struct.field("a"), elt).str.replace(r"^Mx", "")
    b = pl.coalesce(ab.struct.field("b"), elt).str.replace(r"^Mx", "")
    ca = a.replace_strict(_CLASS, default=None, return_dtype=pl.String)
    cb = b.replace_strict(_CLASS, default=None, return_dtype=pl.String)
    low = ca.is_in(["f4", "f6", "f8"]) & cb.is_in(["f4", "f6", "f8"])
    return (pl.when((ca == "f4") & (cb == "f4")).then(pl.lit("fp4"))
            .when(low).then(pl.lit("fp8"))
            .when((ca == cb) & ca.is_in(["bf16", "fp16", "fp32"])).then(ca)
            .otherwise(pl.lit(None, dtype=pl.String)))


def dtype_from_name(name: pl.Expr) -> pl.Expr:
    """The GEMM compute dtype the kernel ``name`` spells out, else null."""
    out = _trtllm_gen(name)
    for pattern, dtype in reversed(_PATTERNS):
        out = pl.when(name.str.contains(pattern)).then(pl.lit(dtype)).otherwise(out)
    return out


def name_dtypes(names: pl.Series) -> pl.Series:
    """:func:`dtype_from_name` over a column, evaluated once per distinct name (names are
    compared as categoricals: hashing millions of long kernel names once, not per join), each
    pattern only on the names no earlier pattern matched (100k+ distinct Tensile names then
    take a few regex passes, not twenty); the dtypes come back dictionary-encoded
    (``pl.Categorical``, the event frames' text)."""
    coded = names.cast(pl.Categorical).to_frame("name")
    distinct = coded.unique()
    text = distinct["name"].cast(pl.String)
    found = pl.repeat(None, len(text), dtype=pl.String, eager=True).alias("_dt")
    rest = pl.Series(range(len(text)), dtype=pl.UInt32)  # rows no pattern has matched yet
    for pattern, dtype in _PATTERNS:  # first match wins, as in dtype_from_name's chain
        if not len(rest):
            break
        hit = text.gather(rest).str.contains(pattern).fill_null(False)
        found = found.scatter(rest.filter(hit), dtype)
        rest = rest.filter(~hit)
    if len(rest):
        found = found.scatter(rest, text.gather(rest).to_frame("n").select(
            _trtllm_gen(pl.col("n"))).to_series())
    distinct = distinct.with_columns(found.cast(pl.Categorical))
    return coded.join(distinct, on="name", how="left", nulls_equal=True,
                      maintain_order="left")["_dt"]
