"""The peak rates of each GPU and TPU: the roofline ceilings
(docs/cost-model.md#7-hardware-peaks-tracelenscorehardware-tracelens-gpus). Which product a
device is comes from :mod:`tracelens.loading.identify`; a name the table lacks is kept with
peaks unknown.

Peaks (:data:`SPECS`) are **dense** (no sparsity) TFLOP/s per dtype, HBM TB/s, memory and
GPU–GPU link bandwidth, with sources (shared/reference/rocprof.md §5.2 and §5.3, which cite
AMD's ``ROCm/ROCm docs/conceptual/gpu-arch/mi300.md``, ``gpu-arch-specs.rst``, rocprof-compute's
speed-of-light formulas, and NVIDIA's H100/H200/HGX datasheets). For an AMD device whose CU
count and clock the trace gives, the FLOP peaks are derived as CUs × clock × FLOPs/clock/CU
(:data:`PER_CU_RATES`; this handles CPX/DPX partitions and SKU clocks and reproduces AMD's
published figures); HBM, memory and link come from the table. The HBM bandwidth ROCm writes
into XSpace (``memory_bandwidth``) is about half the real value (it uses the memory-controller
clock) and is never used as a peak: :func:`reported_bandwidth_warning` says when it disagrees.
Users override with ``--gpu NAME`` and ``--gpu-specs FILE`` (:func:`load_specs_file`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tracelens.core.model import Notice

GIB = 1 << 30
DTYPES: tuple[str, ...] = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "fp6", "fp4", "int8")


# Dense FLOPs per clock per CU (matrix cores; rocprof.md §5.1 from ROCm mi300.md and
# rocprof-compute 0200_system_speed_of_light.yaml). fp64/fp32 use the matrix rate (the
# largest the hardware has for that dtype). gfx950 has no native TF32 (emulated): absent.
PER_CU_RATES: dict[str, dict[str, int]] = {
    "gfx90a": {"fp64": 256, "fp32": 256, "fp16": 1024, "bf16": 1024, "int8": 1024},
    "gfx942": {"fp64": 256, "fp32": 256, "tf32": 1024, "fp16": 2048, "bf16": 2048,
               "fp8": 4096, "int8": 4096},
    "gfx950": {"fp64": 128, "fp32": 256, "fp16": 4096, "bf16": 4096, "fp8": 8192,
               "fp6": 16384, "fp4": 16384, "int8": 8192},
}

_SRC_AMD = ("ROCm/ROCm docs/conceptual/gpu-arch/mi300.md (MI300X peaks, FLOPS/clock/CU)",
            "ROCm/ROCm docs/reference/gpu-arch-specs.rst (CUs, memory)",
            "rocprofiler-compute 0200_system_speed_of_light.yaml (per-CU rates)",
            "shared/reference/rocprof.md §5.1-5.2")
_SRC_NV = ("nvidia.com/en-us/data-center/h100/, /h200/, /hgx/ datasheets (dense = sparse / 2)",
           "shared/reference/rocprof.md §5.3")
# Vendor datasheets of the later products (values as the datasheets print them,
# dense: NVIDIA's starred sparse figures halved).
_SRC_MI200 = ("amd.com/en/products/accelerators/instinct/mi200/mi250x.html and mi210.html "
              "(peak engine clock 1700 MHz, CUs, HBM2e size and bandwidth, FLOPs)",
              "rocprofiler-compute gfx90a 0200_system_speed_of_light.yaml (per-CU rates)")
_SRC_MI250 = ("amd.com/en/products/accelerators/instinct/mi200/mi250.html (per OAM: 208 CUs at "
              "1700 MHz peak engine clock, 90.5 TF FP64/FP32 matrix, 362.1 TF FP16/BF16, 362.1 "
              "TOPS INT8, 128 GB HBM2e at 3.2768 TB/s, 6 Infinity Fabric links)",
              "rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi250.html (104 active CUs and "
              "1.6 TB/s HBM2e per GCD)",
              "rocprofiler-compute gfx90a 0200_system_speed_of_light.yaml (per-CU rates)")
_SRC_A100 = ("NVIDIA A100 Tensor Core GPU datasheet, nvidia.com/en-us/data-center/a100/ "
             "(SXM column; dense = sparse / 2)",)
_SRC_V100 = ("NVIDIA V100 Tensor Core GPU datasheet, nvidia.com/en-us/data-center/v100/ "
             "(SXM2 column)",)
_SRC_L40S = ("NVIDIA L40S datasheet, nvidia.com/en-us/data-center/l40s/ (dense = sparse / 2)",)
_SRC_GH200 = ("NVIDIA GH200 Grace Hopper Superchip datasheet, "
              "nvidia.com/en-us/data-center/grace-hopper-superchip/ (GPU part, dense = "
              "sparse / 2; the same H100 GPU and clocks as our h100 row)",)
_SRC_H800 = ("NVIDIA H800 SXM5 product brief (tensor rates as H100 SXM5, dense = sparse / 2; "
             "NVLink 400 GB/s)",)
_SRC_H100_FORMS = ("NVIDIA H100 Tensor Core GPU datasheet, nvidia.com/en-us/data-center/h100/ "
                   "(H100 PCIe and H100 NVL columns; dense = sparse / 2)",)
_SRC_H20 = ("NVIDIA H20 product brief as partners publish it (nvidia.com has no public H20 "
            "datasheet): 96 GB HBM3 at 4.0 TB/s, NVLink 900 GB/s; dense FP64 1, FP32 44, TF32 "
            "74, FP16/BF16 148, FP8/INT8 296", "78 SMs: CUDA device queries of the H20")
_SRC_A800 = ("NVIDIA A800 40GB Active and A800 80GB product briefs (the A100's tensor rates and "
             "HBM, NVLink 400 GB/s; dense = sparse / 2)",)
_SRC_MI308X = ("ROCm/rocMLIR pull request #1927 (MI308X: gfx942, 80 CUs)",
               "rocprofiler-compute gfx942 0200_system_speed_of_light.yaml (per-CU rates)")
# Google Cloud TPU documentation, one page per generation (the chip's key specifications
# table), read 2026-12: peaks per chip as Google quotes them (bf16 is the MXU's dense rate).
_SRC_TPU_V4 = ("docs.cloud.google.com/tpu/docs/v4 (peak bf16 and int8 275 per chip, 32 GiB "
               "HBM2 at 1200 GB/s)",)
_SRC_TPU_V5E = ("docs.cloud.google.com/tpu/docs/v5e (peak bf16 197 TFLOPs, int8 393 TOPs, "
                "16 GB HBM2 at 819 GB/s, ICI 400 GB/s bidirectional per chip)",)
_SRC_TPU_V5P = ("docs.cloud.google.com/tpu/docs/v5p and tpu7x (peak bf16 459 TFLOPs, 95 GiB "
                "HBM at 2765 GB/s, ICI 1200 GB/s bidirectional per chip)",)
_SRC_TPU_V6E = ("docs.cloud.google.com/tpu/docs/v6e (peak bf16 918 TFLOPs, int8 1836 TOPs, "
                "32 GB HBM at 1638 GB/s, ICI 800 GB/s bidirectional per chip)",)
_SRC_TPU_V7 = ("docs.cloud.google.com/tpu/docs/tpu7x (peak bf16 2307 TFLOPs, fp8 4614, 192 GiB "
               "HBM at 7380 GB/s, ICI 1200 GB/s bidirectional per chip)",)
_AMPERE = {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "int8": 624}
_HOPPER = {"fp64": 67, "fp32": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9,
           "int8": 1978.9}


@dataclass(frozen=True)
class GpuSpec:
    """Peak rates of one GPU. ``peak_tflops``: dense TFLOP/s (TOPS for int8) per dtype; a
    dtype the GPU has no native rate for is absent. ``link_gb_per_s``: aggregate
    bidirectional GPU–GPU bandwidth per GPU as vendors quote it."""

    id: str
    name: str
    vendor: str
    arch: str | None
    peak_tflops: dict[str, float] = field(default_factory=dict)
    hbm_tb_per_s: float | None = None
    memory_gb: float | None = None
    link_gb_per_s: float | None = None
    compute_units: int | None = None
    clock_mhz: float | None = None
    sources: tuple[str, ...] = ()
    notes: str = ""
    source: str = "table"  # how this device's spec was obtained (table, derived, ...)
    aliases: tuple[str, ...] = ()

    def peak(self, dtype: str | None) -> float | None:
        return self.peak_tflops.get(dtype) if dtype else None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "vendor": self.vendor, "arch": self.arch,
                "peak_tflops": {d: self.peak_tflops[d] for d in DTYPES
                                if d in self.peak_tflops},
                "hbm_tb_per_s": self.hbm_tb_per_s, "memory_gb": self.memory_gb,
                "link_gb_per_s": self.link_gb_per_s, "compute_units": self.compute_units,
                "clock_mhz": self.clock_mhz, "source": self.source, "notes": self.notes,
                "sources": list(self.sources)}


def derive_peaks(arch: str | None, compute_units: int | None,
                 clock_mhz: float | None) -> dict[str, float] | None:
    """Dense peaks from CUs × clock × FLOPs/clock/CU (TFLOP/s, one decimal as AMD quotes),
    None when the arch's per-CU rates are not known or the trace lacks CUs or clock."""
    rates = PER_CU_RATES.get(arch or "")
    if not rates or not compute_units or not clock_mhz:
        return None
    return {d: round(compute_units * clock_mhz * r / 1e6, 1) for d, r in rates.items()}


def _amd(arch: str, cus: int, mhz: float) -> dict[str, float]:
    return derive_peaks(arch, cus, mhz) or {}


SPECS: dict[str, GpuSpec] = {s.id: s for s in (
    GpuSpec("mi300x", "AMD Instinct MI300X", "amd", "gfx942", _amd("gfx942", 304, 2100),
            hbm_tb_per_s=5.3, memory_gb=192, link_gb_per_s=896, compute_units=304,
            clock_mhz=2100, sources=_SRC_AMD, aliases=("MI300X",),
            notes="HBM 5.3 TB/s = 128 ch × 32 B × 1300 MHz; link: 7 × 128 GB/s "
                  "bidirectional Infinity Fabric"),
    GpuSpec("mi325x", "AMD Instinct MI325X", "amd", "gfx942", _amd("gfx942", 304, 2100),
            hbm_tb_per_s=6.0, memory_gb=256, link_gb_per_s=896, compute_units=304,
            clock_mhz=2100, sources=_SRC_AMD, aliases=("MI325X",)),
    GpuSpec("mi350x", "AMD Instinct MI350X", "amd", "gfx950", _amd("gfx950", 256, 2200),
            hbm_tb_per_s=8.0, memory_gb=288, link_gb_per_s=1075.2, compute_units=256,
            clock_mhz=2200, sources=_SRC_AMD, aliases=("MI350X",),
            notes="link 7 × 153.6 GB/s bidirectional is marked 'verify' in the reference"),
    GpuSpec("mi355x", "AMD Instinct MI355X", "amd", "gfx950", _amd("gfx950", 256, 2400),
            hbm_tb_per_s=8.0, memory_gb=288, link_gb_per_s=1075.2, compute_units=256,
            clock_mhz=2400, sources=_SRC_AMD, aliases=("MI355X",),
            notes="link 7 × 153.6 GB/s bidirectional is marked 'verify' in the reference"),
    GpuSpec("mi300a", "AMD Instinct MI300A", "amd", "gfx942", _amd("gfx942", 228, 2100),
            memory_gb=128, compute_units=228, clock_mhz=2100, sources=_SRC_AMD,
            aliases=("MI300A",), notes="HBM bandwidth not in our references: unknown"),
    # One MI250X OAM is two GCDs, each its own device: per GCD 110 CUs, 64 GB HBM2e and half
    # the OAM's 3.2768 TB/s; FLOPs = 110 CUs x 1700 MHz x rate (95.7 TF FP64 matrix and 383 TF
    # FP16 per OAM on the datasheet = 2 x 47.9 and 2 x 191.5).
    GpuSpec("mi250x", "AMD Instinct MI250X (one GCD)", "amd", "gfx90a",
            _amd("gfx90a", 110, 1700), hbm_tb_per_s=1.6384, memory_gb=64, compute_units=110,
            clock_mhz=1700, sources=_SRC_MI200, aliases=("MI250X",),
            notes="per GCD (half an OAM); link unknown per GCD: the datasheet's 800 GB/s "
                  "Infinity Fabric is per OAM and partly joins its own two GCDs"),
    # MI250: an OAM of two GCDs like the MI250X, each 104 CUs, 64 GB and half the OAM's
    # 3.2768 TB/s; FLOPs = 104 CUs x 1700 MHz x rate (90.5 TF FP64 matrix and 362.1 TF FP16
    # per OAM on the datasheet = 2 x 45.3 and 2 x 181.0).
    GpuSpec("mi250", "AMD Instinct MI250 (one GCD)", "amd", "gfx90a",
            _amd("gfx90a", 104, 1700), hbm_tb_per_s=1.6384, memory_gb=64, compute_units=104,
            clock_mhz=1700, sources=_SRC_MI250, aliases=("MI250",),
            notes="per GCD (half an OAM); link unknown per GCD: the datasheet's 6 Infinity "
                  "Fabric links are per OAM and partly join its own two GCDs"),
    GpuSpec("mi210", "AMD Instinct MI210", "amd", "gfx90a", _amd("gfx90a", 104, 1700),
            hbm_tb_per_s=1.6384, memory_gb=64, link_gb_per_s=300, compute_units=104,
            clock_mhz=1700, sources=_SRC_MI200, aliases=("MI210",),
            notes="datasheet: 45.3 TF FP64/FP32 matrix, 181 TF FP16/BF16, 64 GB HBM2e at "
                  "1.6384 TB/s, up to 3 Infinity Fabric links, 300 GB/s peak aggregate"),
    GpuSpec("a100", "NVIDIA A100 80GB", "nvidia", "sm_80", dict(_AMPERE),
            hbm_tb_per_s=2.039, memory_gb=80, link_gb_per_s=600, compute_units=108,
            sources=_SRC_A100, aliases=("A100", "A100 80GB", "A100-SXM4-80GB"),
            notes="SXM4 80GB (PCIe 80GB: 1.935 TB/s); fp64 = FP64 Tensor, fp32 = non-tensor "
                  "FP32; NVLink 3 600 GB/s"),
    GpuSpec("a100-40gb", "NVIDIA A100 40GB", "nvidia", "sm_80", dict(_AMPERE),
            hbm_tb_per_s=1.555, memory_gb=40, link_gb_per_s=600, compute_units=108,
            sources=_SRC_A100, aliases=("A100", "A100 40GB", "A100-SXM4-40GB"),
            notes="SXM4 40GB; NVLink 3 600 GB/s"),
    GpuSpec("v100", "NVIDIA V100", "nvidia", "sm_70",
            {"fp64": 7.8, "fp32": 15.7, "fp16": 125},
            hbm_tb_per_s=0.9, memory_gb=32, link_gb_per_s=300, compute_units=80,
            sources=_SRC_V100, aliases=("V100", "Tesla V100", "V100 SXM2"),
            notes="SXM2 (16 or 32 GB HBM2, 900 GB/s; memory_gb is the 32 GB part); "
                  "fp16 = Tensor Core mixed precision; no bf16/tf32/int8 tensor rates; "
                  "NVLink 2 300 GB/s"),
    GpuSpec("l40s", "NVIDIA L40S", "nvidia", "sm_89",
            {"fp32": 91.6, "tf32": 183, "fp16": 362.05, "bf16": 362.05, "fp8": 733,
             "int8": 733},
            hbm_tb_per_s=0.864, memory_gb=48, compute_units=142, sources=_SRC_L40S,
            aliases=("L40S",),
            notes="48 GB GDDR6 (not HBM) at 864 GB/s; no NVLink (PCIe Gen4 x16): link "
                  "unknown; FP64 not on the datasheet"),
    GpuSpec("gh200", "NVIDIA GH200 (96GB)", "nvidia", "sm_90", dict(_HOPPER),
            hbm_tb_per_s=4.0, memory_gb=96, link_gb_per_s=900, compute_units=132,
            sources=_SRC_GH200, aliases=("GH200",),
            notes="96 GB HBM3 at 4 TB/s (the 144 GB HBM3e part: 4.9 TB/s, use --gpu-specs); "
                  "NVLink 4 900 GB/s"),
    GpuSpec("h100", "NVIDIA H100 SXM", "nvidia", "sm_90",
            {"fp64": 67, "fp32": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4,
             "fp8": 1978.9, "int8": 1978.9},
            hbm_tb_per_s=3.35, memory_gb=80, link_gb_per_s=900, compute_units=132,
            sources=_SRC_NV, aliases=("H100", "H100 SXM5", "H100-SXM"),
            notes="fp64 = FP64 Tensor; fp32 = non-tensor FP32; NVLink 4 (18 links)"),
    GpuSpec("h800", "NVIDIA H800", "nvidia", "sm_90",
            {"fp32": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9,
             "int8": 1978.9},
            hbm_tb_per_s=3.35, memory_gb=80, link_gb_per_s=400, compute_units=132,
            sources=_SRC_H800, aliases=("H800", "H800 SXM5"),
            notes="the H100 SXM die and tensor rates for the China market; NVLink cut to "
                  "400 GB/s (8 links) and FP64 cut (its rate is not confirmed here: absent)"),
    GpuSpec("h100-pcie", "NVIDIA H100 PCIe", "nvidia", "sm_90",
            {"fp64": 51, "fp32": 51, "tf32": 378, "fp16": 756.5, "bf16": 756.5, "fp8": 1513,
             "int8": 1513},
            hbm_tb_per_s=2.0, memory_gb=80, link_gb_per_s=600, compute_units=114,
            sources=_SRC_H100_FORMS, aliases=("H100 PCIe", "H100-PCIe"),
            notes="114 SMs, 80 GB HBM2e at 2 TB/s; fp64 = FP64 Tensor; NVLink bridge 600 GB/s"),
    GpuSpec("h100-nvl", "NVIDIA H100 NVL", "nvidia", "sm_90",
            {"fp64": 60, "fp32": 60, "tf32": 417.5, "fp16": 835.5, "bf16": 835.5,
             "fp8": 1670.5, "int8": 1670.5},
            hbm_tb_per_s=3.9, memory_gb=94, link_gb_per_s=600, compute_units=132,
            sources=_SRC_H100_FORMS, aliases=("H100 NVL",),
            notes="one GPU of the NVL pair: 94 GB HBM3 at 3.9 TB/s; fp64 = FP64 Tensor; "
                  "NVLink bridge 600 GB/s"),
    GpuSpec("h20", "NVIDIA H20 (96GB)", "nvidia", "sm_90",
            {"fp64": 1, "fp32": 44, "tf32": 74, "fp16": 148, "bf16": 148, "fp8": 296,
             "int8": 296},
            hbm_tb_per_s=4.0, memory_gb=96, link_gb_per_s=900, compute_units=78,
            sources=_SRC_H20, aliases=("H20",),
            notes="Hopper for the China market, tensor rates capped; the later 141 GB part "
                  "is not this entry (use --gpu-specs)"),
    GpuSpec("a800", "NVIDIA A800 80GB", "nvidia", "sm_80", dict(_AMPERE),
            hbm_tb_per_s=2.039, memory_gb=80, link_gb_per_s=400, compute_units=108,
            sources=_SRC_A800, aliases=("A800", "A800 80GB", "A800-SXM4-80GB"),
            notes="SXM4 80GB (PCIe 80GB: 1.935 TB/s); NVLink 3 cut to 400 GB/s"),
    GpuSpec("a800-40gb", "NVIDIA A800 40GB", "nvidia", "sm_80", dict(_AMPERE),
            hbm_tb_per_s=1.555, memory_gb=40, link_gb_per_s=400, compute_units=108,
            sources=_SRC_A800, aliases=("A800", "A800 40GB"),
            notes="A800 40GB Active (PCIe); NVLink bridge 400 GB/s"),
    GpuSpec("mi308x", "AMD Instinct MI308X", "amd", "gfx942", {},
            compute_units=80, sources=_SRC_MI308X, aliases=("MI308X",),
            notes="clock, HBM size and bandwidth and link are in no source we have: unknown; "
                  "FLOP peaks are derived from the trace's CUs x clock where it records the "
                  "clock (XSpace, rocprofv3), else unknown"),
    GpuSpec("h200", "NVIDIA H200 SXM", "nvidia", "sm_90",
            {"fp64": 67, "fp32": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4,
             "fp8": 1978.9, "int8": 1978.9},
            hbm_tb_per_s=4.8, memory_gb=141, link_gb_per_s=900, compute_units=132,
            sources=_SRC_NV, aliases=("H200",)),
    GpuSpec("b200", "NVIDIA B200", "nvidia", "sm_100",
            {"fp64": 37, "fp32": 75, "tf32": 1100, "fp16": 2250, "bf16": 2250, "fp8": 4500,
             "fp6": 4500, "fp4": 9000, "int8": 4500},
            hbm_tb_per_s=8.0, memory_gb=180, link_gb_per_s=1800, compute_units=148,
            sources=_SRC_NV, aliases=("B200",),
            notes="HGX B200 1000 W; HBM quoted 7.7-8 TB/s (8.0 used); NVLink 5"),
    # TPUs: for traces whose TPU plane lacks its own peak stats; when the plane
    # has them (peak_teraflops_per_second, peak_hbm_bw_gigabytes_per_second) those are used.
    GpuSpec("tpu-v4", "Google TPU v4", "google", "tpu-v4", {"bf16": 275, "int8": 275},
            hbm_tb_per_s=1.2, memory_gb=32 * GIB / 1e9, sources=_SRC_TPU_V4,
            aliases=("TPU v4",), notes="per chip (two TensorCores as one megacore device)"),
    GpuSpec("tpu-v5e", "Google TPU v5e", "google", "tpu-v5e", {"bf16": 197, "int8": 393},
            hbm_tb_per_s=0.819, memory_gb=16, link_gb_per_s=400, sources=_SRC_TPU_V5E,
            aliases=("TPU v5e", "TPU v5 Lite", "TPU v5litepod"),
            notes="one TensorCore per chip; XSpace names it 'TPU v5 Lite' and its planes "
                  "report 202.7 TFLOP/s and 819.16 GB/s, which are used when present"),
    GpuSpec("tpu-v5p", "Google TPU v5p", "google", "tpu-v5p", {"bf16": 459},
            hbm_tb_per_s=2.765, memory_gb=95 * GIB / 1e9, link_gb_per_s=1200,
            sources=_SRC_TPU_V5P, aliases=("TPU v5p", "TPU v5"),
            notes="per chip (two TensorCores as one megacore device)"),
    GpuSpec("tpu-v6e", "Google TPU v6e (Trillium)", "google", "tpu-v6e",
            {"bf16": 918, "int8": 1836}, hbm_tb_per_s=1.638, memory_gb=32, link_gb_per_s=800,
            sources=_SRC_TPU_V6E, aliases=("TPU v6e", "TPU v6 Lite", "Trillium"),
            notes="one TensorCore per chip"),
    GpuSpec("tpu-v7", "Google TPU7x (Ironwood)", "google", "tpu-v7",
            {"bf16": 2307, "fp8": 4614}, hbm_tb_per_s=7.38, memory_gb=192 * GIB / 1e9,
            link_gb_per_s=1200, sources=_SRC_TPU_V7, aliases=("TPU7x", "TPU v7", "Ironwood"),
            notes="per chip; each chip is two devices (chiplets) to JAX, each half of these"),
)}


def normalized(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def find_spec(name: str, table: dict[str, GpuSpec] | None = None) -> GpuSpec | None:
    """A spec by id, name or alias, case and punctuation ignored (``mi300x``, ``MI300X``,
    ``AMD Instinct MI300X``, ``h100-sxm``); None when nothing matches.

    An id as written wins. A name that several specs answer to (``A100``: the 40 and 80 GB
    cards) raises ValueError naming them: the peaks differ, so the choice is the user's."""
    table = SPECS if table is None else table
    if name in table:
        return table[name]
    key = normalized(name)
    found = [spec for spec in table.values()
             if key in {normalized(n) for n in (spec.id, spec.name, *spec.aliases,
                                           re.sub(r"^(AMD Instinct|NVIDIA)\s+", "", spec.name))}]
    if len(found) > 1:
        raise ValueError(f"{name!r} names {len(found)} GPUs: "
                         + ", ".join(f"{s.id} ({s.name})" for s in found) + "; give its id")
    return found[0] if found else None


_SPEC_KEYS = {"name", "vendor", "arch", "peak_tflops", "hbm_tb_per_s", "memory_gb",
              "link_gb_per_s", "compute_units", "clock_mhz", "notes", "base", "sources"}


def load_specs_file(path: str | Path) -> dict[str, GpuSpec]:
    """GPU specs from a TOML or JSON file: one table/object per GPU id, e.g.

    .. code-block:: toml

        [mi300x]                 # an existing id: these fields replace the built-in ones
        hbm_tb_per_s = 5.0
        [my_gpu]                 # a new id, selectable with --gpu my_gpu
        base = "mi300x"          # optional: start from a built-in entry
        name = "My GPU"
        peak_tflops = { bf16 = 1000.0, fp8 = 2000.0 }
        hbm_tb_per_s = 4.0

    Raises ValueError with the problem (unknown key, dtype, base, or a non-number).
    """
    path = Path(path)
    text = path.read_text()
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        data = json.loads(text)
    else:
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib  # type: ignore[no-redef]
        data = tomllib.loads(text)
    if not isinstance(data, dict) or not data:
        raise ValueError("expected one table (TOML) or object (JSON) per GPU id")
    out: dict[str, GpuSpec] = {}
    for gid, entry in data.items():
        if not isinstance(entry, dict):
            raise ValueError(f"[{gid}] must be a table of fields")
        unknown = set(entry) - _SPEC_KEYS
        if unknown:
            raise ValueError(f"[{gid}] unknown field(s) {sorted(unknown)}; known: "
                             f"{sorted(_SPEC_KEYS)}")
        base_name = entry.get("base", gid if gid in SPECS else None)
        base = SPECS.get(base_name) if base_name else None
        if entry.get("base") and base is None:
            raise ValueError(f"[{gid}] base {entry['base']!r} is not a built-in GPU id")
        peaks = dict(base.peak_tflops) if base else {}
        for dtype, value in (entry.get("peak_tflops") or {}).items():
            if dtype not in DTYPES:
                raise ValueError(f"[{gid}] peak_tflops.{dtype}: unknown dtype (known: "
                                 f"{', '.join(DTYPES)})")
            peaks[dtype] = _number(gid, f"peak_tflops.{dtype}", value)
        fields: dict[str, Any] = {}
        for key in ("hbm_tb_per_s", "memory_gb", "link_gb_per_s", "clock_mhz"):
            if key in entry:
                fields[key] = _number(gid, key, entry[key])
        if "compute_units" in entry:
            fields["compute_units"] = int(_number(gid, "compute_units", entry["compute_units"]))
        for key in ("name", "vendor", "arch", "notes"):
            if key in entry:
                fields[key] = str(entry[key])
        srcs = tuple(entry.get("sources", ())) or (f"specs file {path}",)
        start = base or GpuSpec(id=gid, name=gid, vendor="unknown", arch=None)
        out[gid] = replace(start, id=gid, peak_tflops=peaks, sources=srcs,
                           source=f"specs file {path.name}", aliases=(), **fields)
    return out


def _number(gid: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"[{gid}] {key} = {value!r}: expected a non-negative number")
    return float(value)


def spec_for_device(spec_id: str | None, arch: str | None, compute_units: int | None,
                    clock_mhz: float | None, gpu: str | None = None,
                    extra: dict[str, GpuSpec] | None = None,
                    own: tuple[float | None, float | None] = (None, None),
                    own_name: str | None = None) -> GpuSpec | None:
    """The spec one device uses.

    ``own``: the device's own dense peak (TFLOP/s) and HBM bandwidth (TB/s) as its trace
    gives them (XSpace TPU planes); when given, they replace the table's bf16 peak and HBM
    bandwidth (a TPU plane's figure is its matrix units' bf16 rate), unless ``gpu`` or
    ``extra`` says otherwise. ``own_name``: the device's name, for a device the table lacks.

    ``gpu`` (``--gpu``) forces a table entry as it is. Otherwise the identified entry
    (``spec_id``; an entry of the same id in ``extra`` replaces the built-in), with AMD FLOP
    peaks derived from the trace's CUs × clock when it gives them; an unidentified AMD device
    with CUs and clock gets derived FLOP peaks and no HBM (unknown). A single ``extra`` entry
    and no ``gpu`` applies to every device.
    """
    table = {**SPECS, **(extra or {})}
    if gpu is not None:
        spec = find_spec(gpu, table)
        if spec is None:
            raise ValueError(f"unknown GPU {gpu!r} (known: {', '.join(sorted(table))})")
        return replace(spec, source=f"--gpu {gpu}" + (f" ({spec.source})" if spec.source !=
                                                      "table" else ""))
    if extra and len(extra) == 1 and next(iter(extra)) not in SPECS:
        return next(iter(extra.values()))
    spec = table.get(spec_id) if spec_id else None
    if spec is not None and extra and spec_id in extra:
        return spec  # the user's numbers, as given
    if own[0] is not None or own[1] is not None:
        return _own_peaks(spec, spec_id or own_name, arch, own)
    derived = derive_peaks(arch, compute_units, clock_mhz)
    if derived is None:
        return spec
    how = (f"derived: {compute_units} CUs × {clock_mhz:g} MHz × FLOPs/clock/CU ({arch})")
    if spec is None:
        return GpuSpec(id=f"{arch}-{compute_units}cu", name=f"{arch} ({compute_units} CUs)",
                       vendor="amd", arch=arch, peak_tflops=derived,
                       compute_units=compute_units, clock_mhz=clock_mhz, sources=_SRC_AMD,
                       source=how, notes="unidentified product: HBM, memory and link unknown")
    return replace(spec, peak_tflops={**spec.peak_tflops, **derived},
                   compute_units=compute_units, clock_mhz=clock_mhz, source=how + "; "
                   "HBM, memory, link from the table")


def _own_peaks(spec: GpuSpec | None, spec_id: str | None, arch: str | None,
               own: tuple[float | None, float | None]) -> GpuSpec:
    """The spec with the trace's own peaks (bf16 TFLOP/s, HBM TB/s) in place of the table's."""
    tflops, hbm = own
    said = " and ".join(x for x, v in (("peak_teraflops_per_second", tflops),
                                       ("peak_hbm_bw_gigabytes_per_second", hbm)) if v is not None)
    how = f"trace: the device plane's {said}"
    name = spec_id or arch or "unnamed device"
    base = spec or GpuSpec(id=name, name=name, vendor="google", arch=arch,
                           notes="not in the table: peaks from the trace only")
    peaks = dict(base.peak_tflops)
    if tflops is not None:
        peaks["bf16"] = tflops
    return replace(base, peak_tflops=peaks,
                   hbm_tb_per_s=hbm if hbm is not None else base.hbm_tb_per_s,
                   source=how + ("; the rest from the table" if spec else ""))


def reported_bandwidth_warning(spec_id: str | None, reported_bytes_per_s: Any
                               ) -> Notice | None:
    """A notice when a trace's own HBM bandwidth stat (ROCm XSpace ``memory_bandwidth``)
    disagrees (> 5 %) with the table; the table value is the one used."""
    spec = SPECS.get(spec_id or "")
    if spec is None or spec.hbm_tb_per_s is None or not isinstance(
            reported_bytes_per_s, (int, float)) or reported_bytes_per_s <= 0:
        return None
    reported = reported_bytes_per_s / 1e12
    if abs(reported - spec.hbm_tb_per_s) / spec.hbm_tb_per_s <= 0.05:
        return None
    return Notice.of(
        "devices.reported_bandwidth", "{product}: the trace reports memory_bandwidth "
        "{reported:.3g} TB/s, the datasheet says {datasheet:g} TB/s; the roofline uses the "
        "datasheet value (ROCm derives the stat from the memory-controller clock, about half "
        "the real rate)", product=spec.name, reported=reported, datasheet=spec.hbm_tb_per_s)
