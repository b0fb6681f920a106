"""Device models for synthetic traces: what a GPU is, what its trace says about it, how fast it is.

A :class:`DeviceModel` carries three kinds of facts:

- identity, as ``trace.devices`` holds it (vendor, arch, compute units, clock, memory);
- the format hints real traces show for this device: the XSpace plane stats the XLA collector
  writes (values and stat types as observed in real files, shared/reference/xprof.md §2.2-2.4),
  the stream-line naming style, the ``kernel_details`` format and the stream ids;
- speeds used to turn the scenario's model dimensions into kernel durations (dense bf16 matrix
  peak, HBM bandwidth, achievable collective bus bandwidth inside and across nodes). These
  shape the synthetic timeline; the truth's MFU divides by ``peak_tflops`` (the datasheet
  dense bf16 peak, as tracelens.core.hardware has it), no analysis reads them back.

Adding a device: add one ``DeviceModel`` to :data:`DEVICE_MODELS` (see docs/synthetic.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


from tracelens.loading import identify


@dataclass(frozen=True)
class DeviceModel:
    key: str
    vendor: str  # "amd" | "nvidia" (trace.devices.vendor)
    arch: str  # gfx942, gfx950, sm_90
    compute_units: int
    clock_mhz: float
    memory_bytes: int
    plane_stats: tuple[tuple[str, Any], ...]  # XSpace plane stats, in the collector's order
    line_names: str  # "types": Stream #N(Kernel) ... ; "plain": Stream #N
    kernel_details: str  # "rocprofiler-sdk" | "rocm" | "cuda" (format of the stat)
    streams: tuple[int, int, int]  # (compute, collective, copy) stream ids
    peak_tflops: float  # dense bf16 matrix TFLOP/s
    hbm_tbps: float  # HBM TB/s (datasheet)
    link_gbps: float  # achievable collective bus bandwidth inside a node, GB/s per GPU
    network_gbps: float  # achievable bus bandwidth across nodes, GB/s per GPU
    family: str  # kernel-name family: "amd" or "nvidia"
    isa: str = ""  # hipBLASLt ISA token (ISA942, ISA950)
    ck_arch: str = ""  # CK tile arch tag (gfx942_t, gfx950_t)
    host_pattern: str = "{key}-node{h}"

    def devices_row(self) -> dict[str, Any]:
        """The ``trace.devices`` columns a reader derives from this device's plane stats."""
        product = identify.identify(self.vendor, self.arch, self.compute_units,
                                    self.clock_mhz, self.memory_bytes)
        return {"vendor": self.vendor, "arch": self.arch,
                "product": product.name if product else None,
                "compute_units": self.compute_units, "clock_mhz": self.clock_mhz,
                "memory_bytes": self.memory_bytes,
                "spec_id": product.spec_id if product else None}


MI300X = DeviceModel(
    key="mi300x", vendor="amd", arch="gfx942", compute_units=304, clock_mhz=2100.0,
    memory_bytes=206_141_652_992,
    # As the 2026 JAX 0.8 MI300X traces carry them (no gpu_device_name yet).
    plane_stats=(("device_vendor", "AMD"), ("clock_rate", 2_100_000), ("core_count", 304),
                 ("memory_bandwidth", 2_662_400_000_000), ("memory_size", 206_141_652_992),
                 ("compute_cap_major", 9), ("compute_cap_minor", 4)),
    line_names="types", kernel_details="rocprofiler-sdk", streams=(16, 19, 17),
    peak_tflops=1307.4, hbm_tbps=5.3, link_gbps=310.0, network_gbps=45.0,
    family="amd", isa="ISA942", ck_arch="gfx942_t")

MI355X = DeviceModel(
    key="mi355x", vendor="amd", arch="gfx950", compute_units=256, clock_mhz=2400.0,
    memory_bytes=309_220_868_096,
    # Newest collector: plain "Stream #N" lines, gpu_device_name, newest kernel_details.
    plane_stats=(("device_vendor", "AMD"), ("clock_rate", 2_400_000), ("core_count", 256),
                 ("memory_bandwidth", 4_096_000_000_000), ("memory_size", 309_220_868_096),
                 ("compute_cap_major", 9), ("compute_cap_minor", 5),
                 ("gpu_device_name", "gfx950")),
    line_names="plain", kernel_details="rocm", streams=(2, 3, 4),
    peak_tflops=2516.6, hbm_tbps=8.0, link_gbps=380.0, network_gbps=45.0,
    family="amd", isa="ISA950", ck_arch="gfx950_t")

H100 = DeviceModel(
    key="h100", vendor="nvidia", arch="sm_90", compute_units=132, clock_mhz=1980.0,
    memory_bytes=85_045_231_616,
    # CUPTI collector: memory_bandwidth = 2 x memclk x bus width, gpu_device_name.
    plane_stats=(("device_vendor", "Nvidia"), ("clock_rate", 1_980_000), ("core_count", 132),
                 ("memory_bandwidth", 3_352_320_000_000), ("memory_size", 85_045_231_616),
                 ("compute_cap_major", 9), ("compute_cap_minor", 0),
                 ("gpu_device_name", "NVIDIA H100 80GB HBM3")),
    line_names="types", kernel_details="cuda", streams=(7, 20, 14),
    peak_tflops=989.4, hbm_tbps=3.35, link_gbps=360.0, network_gbps=45.0,
    family="nvidia")

DEVICE_MODELS: dict[str, DeviceModel] = {m.key: m for m in (MI300X, MI355X, H100)}


def device_model(key: str | DeviceModel) -> DeviceModel:
    if isinstance(key, DeviceModel):
        return key
    try:
        return DEVICE_MODELS[key.lower()]
    except KeyError:
        raise ValueError(f"unknown device model {key!r}; known: "
                         f"{', '.join(sorted(DEVICE_MODELS))}") from None
