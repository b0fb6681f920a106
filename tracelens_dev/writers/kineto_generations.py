"""Kineto JSON of a small data-parallel + all-to-all job as each PyTorch generation writes it.

Where the facts of a collective live changed across PyTorch releases (docs/kineto.md, "Where
a collective's facts live"); one writer per generation, for the same planted job, so that
the reader is tested on each structure:

- ``pt2023`` (PyTorch 1.13–2.0): ``c10d::allreduce_`` / ``c10d::alltoall_base_`` ops, a
  ``record_param_comms`` op whose args are only its inputs' shapes (no collective metadata),
  and the backend's ``nccl:all_reduce`` / ``nccl:all_to_all`` annotation with the input
  tensor's ``Input Dims`` and ``Input type`` around the launch; ``ncclKernel_*`` names, the
  all-to-all run as ``ncclKernel_SendRecv_*``; ``distributedInfo`` with ``backend``,
  ``rank`` and ``world_size`` only: no process group anywhere;
- ``pt2.1`` (2.1–2.3): ``record_param_comms`` with ``Collective name``, ``In msg nelems``,
  ``Out msg nelems``, ``Group size``, ``dtype``; the annotation without shapes;
- ``pt2.4`` (2.4 and later): plus ``Process Group Name``, ``Process Group Description`` and
  ``Process Group Ranks`` on it, ``pg_count``/``pg_config``/``nccl_version`` in
  ``distributedInfo``, NCCL ≥ 2.19's ``ncclDevKernel_*`` names (``ncclDevKernel_SendRecv``);
- ``rocm``: a ROCm build of 2.4+: HIP runtime calls (``hipLaunchKernel``), ROCm header keys,
  and RCCL's ``ncclDevKernel_Generic_1``, whose name says nothing of the collective.

The plan (:data:`PLAN`): per step, an all-reduce then an all-to-all on every rank of one
group of all ranks; each rank's collective kernel starts ``SKEW_NS × rank`` after rank 0's and
lasts ``base + rank µs``, so an instance's transfer time (its shortest participant) is the
base duration. :func:`truth` gives what a reader must find.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

GENERATIONS = ("pt2023", "pt2.1", "pt2.4", "rocm")
_BASE_US = 1_700_000_000_000.0  # µs: the first step's start
SKEW_NS = 10_000


@dataclass(frozen=True)
class Planned:
    """One collective of a step: its type, its c10d op and annotation, its tensor and the
    base duration of its kernel."""

    type: str  # tracelens type
    c10d: str  # the c10d dispatcher op (2.0+)
    title: str  # the backend annotation's name (ProcessGroupNCCL's profiling title)
    collective: str  # record_param_comms' Collective name (2.1+)
    nelems: int
    dtype: str  # tracelens dtype
    base_us: int  # rank 0's kernel duration (the shortest)
    start_us: int  # rank 0's kernel start in its step


PLAN = (
    Planned("all-reduce", "c10d::allreduce_", "nccl:all_reduce", "allreduce", 394_241, "fp32",
            200, 3_000),
    Planned("all-to-all", "c10d::alltoall_base_", "nccl:all_to_all", "all_to_all",
            1_048_576, "fp16", 400, 6_000),
)
STEPS = 2
_STEP_US = 10_000
# tracelens dtype -> (record_param_comms dtype, annotation Input type, bytes)
_DTYPES = {"fp32": ("Float", "float", 4), "fp16": ("Half", "c10::Half", 2),
           "bf16": ("BFloat16", "c10::BFloat16", 2), "int64": ("Long", "long int", 8)}
_FACTOR = {"all-reduce": lambda n: 2 * (n - 1) / n, "all-to-all": lambda n: (n - 1) / n}


def kernel_name(gen: str, kind: str, dtype: str) -> str:
    """The collective kernel's name as each generation's NCCL/RCCL calls it."""
    if gen == "rocm":
        return "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"
    if gen == "pt2.4":
        if kind == "all-to-all":
            return "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
        short = {"fp32": "f32", "fp16": "f16", "bf16": "bf16", "int64": "i64"}[dtype]
        return f"ncclDevKernel_AllReduce_Sum_{short}_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
    if kind == "all-to-all":
        return "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
    c = {"fp32": "float", "fp16": "half", "bf16": "__nv_bfloat16", "int64": "int64_t"}[dtype]
    return f"ncclKernel_AllReduce_RING_LL_Sum_{c}(ncclDevComm*, unsigned long, ncclWork*)"


def _header(gen: str, rank: int, world: int) -> dict[str, Any]:
    dist: dict[str, Any] = {"backend": "nccl", "rank": rank, "world_size": world}
    if gen in ("pt2.4", "rocm"):
        dist.update(pg_count=1, pg_config=[{"pg_name": "0", "pg_desc": "default_pg",
                                            "backend_config": "cuda:nccl", "pg_size": world,
                                            "ranks": list(range(world))}],
                    nccl_version="2.21.5")
    doc: dict[str, Any] = {"schemaVersion": 1, "distributedInfo": dist}
    if gen == "rocm":
        doc.update(roctracer_version=4.1, hip_runtime_version=60342134,
                   deviceProperties=[{"id": rank, "name": "AMD Instinct MI300X",
                                      "totalGlobalMem": 206141652992, "computeMajor": 9,
                                      "computeMinor": 4, "warpSize": 64, "numSms": 304}])
    else:
        doc.update(deviceProperties=[{"id": rank, "name": "NVIDIA A100-SXM4-80GB",
                                      "totalGlobalMem": 85100068864, "computeMajor": 8,
                                      "computeMinor": 0, "warpSize": 32, "numSms": 108}])
    if gen != "pt2023":
        doc["baseTimeNanoseconds"] = 1_700_000_000_000_000_000
    return doc


def _comm_args(gen: str, p: Planned, world: int) -> dict[str, Any]:
    """``record_param_comms``' args in each generation."""
    if gen == "pt2023":  # its inputs only (record_shapes), no metadata
        return {"Input Dims": [[], [], [], [], [], [], []],
                "Input type": ["TensorList", "Scalar", "Scalar", "Scalar", "", "", ""]}
    args: dict[str, Any] = {"Collective name": p.collective, "In msg nelems": p.nelems,
                            "Out msg nelems": p.nelems, "Group size": world,
                            "dtype": _DTYPES[p.dtype][0], "In split size": "[]",
                            "Out split size": "[]", "Global rank start": 0,
                            "Global rank stride": 1}
    if gen in ("pt2.4", "rocm"):
        args.update({"Process Group Name": "0", "Process Group Description": "default_pg",
                     "Process Group Ranks": "[" + ", ".join(map(str, range(world))) + "]"})
    return args


def rank_events(gen: str, rank: int, world: int) -> list[dict[str, Any]]:
    """One rank's events: per step a GEMM, then the plan's collectives, each launched
    inside its c10d op ⊃ record_param_comms ⊃ backend annotation, 100 µs before it runs."""
    pid, tid, dev, out = 1000 + rank, 1, rank, []
    launch = "hipLaunchKernel" if gen == "rocm" else "cudaLaunchKernel"
    corr = 0

    def kernel(name: str, ts: float, dur: float, stream: int, at: float) -> None:
        nonlocal corr
        corr += 1
        out.append({"ph": "X", "cat": "kernel", "name": name, "pid": dev, "tid": stream,
                    "ts": ts, "dur": dur, "args": {"device": dev, "stream": stream,
                                                   "correlation": corr,
                                                   "External id": corr}})
        out.append({"ph": "X", "cat": "cuda_runtime", "name": launch, "pid": pid, "tid": tid,
                    "ts": at, "dur": 4.0, "args": {"correlation": corr,
                                                   "External id": corr}})
    for s in range(STEPS):
        t0 = _BASE_US + s * _STEP_US
        out.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}",
                    "pid": pid, "tid": tid, "ts": t0 - 500.0, "dur": float(_STEP_US - 600),
                    "args": {}})
        gemm = ("Cijk_Alik_Bljk_SB_MT128x128x16_MI32x32x2x1" if gen == "rocm"
                else "ampere_sgemm_128x64_nn")
        kernel(gemm, t0, 2_000.0, 7, t0 - 300.0)
        for p in PLAN:
            ts = t0 + p.start_us + rank * SKEW_NS / 1000
            at = t0 + p.start_us - 100.0
            ctype = _DTYPES[p.dtype][1]
            out.append({"ph": "X", "cat": "cpu_op", "name": p.c10d, "pid": pid, "tid": tid,
                        "ts": at - 30.0, "dur": 60.0, "args": {}})
            out.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": pid,
                        "tid": tid, "ts": at - 20.0, "dur": 45.0,
                        "args": _comm_args(gen, p, world)})
            ann: dict[str, Any] = ({"Input Dims": [[p.nelems]], "Input type": [ctype]}
                                   if gen == "pt2023" else {})
            out.append({"ph": "X", "cat": "user_annotation", "name": p.title, "pid": pid,
                        "tid": tid, "ts": at - 10.0, "dur": 30.0, "args": ann})
            kernel(kernel_name(gen, p.type, p.dtype), ts, float(p.base_us + rank), 20, at)
    return out


def write_job(gen: str, out: Path, world: int = 8) -> list[Path]:
    """One ``rank-R.json`` per rank of the planted job as generation ``gen`` writes it."""
    if gen not in GENERATIONS:
        raise ValueError(f"unknown generation {gen!r}: one of {GENERATIONS}")
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r in range(world):
        doc = {**_header(gen, r, world), "traceEvents": rank_events(gen, r, world)}
        path = out / f"rank-{r}.json"
        path.write_bytes(orjson.dumps(doc))
        paths.append(path)
    return paths


def truth(world: int = 8) -> dict[str, dict[str, Any]]:
    """Per planted type: its instances, message bytes (nccl-tests size: the tensor), the
    transfer time (ns, rank 0's duration) and busbw (GB/s: bytes / transfer × factor)."""
    out = {}
    for p in PLAN:
        nbytes = p.nelems * _DTYPES[p.dtype][2]
        ns = p.base_us * 1000
        out[p.type] = {"instances": STEPS, "msg_bytes": nbytes, "transfer_ns": ns,
                       "busbw": nbytes / ns * _FACTOR[p.type](world), "op": p.c10d,
                       "collective": p.collective, "title": p.title}
    return out
