"""Which product a device is, from what the trace says about it (arch, CUs, clock, memory).

Only identification lives here for now; peak rates per dtype arrive with the cost-model work
(DESIGN §6.2). A device that matches no row, or several, stays unidentified (null), never a
guess. Values and sources: shared/reference/rocprof.md §5.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30


@dataclass(frozen=True)
class Product:
    spec_id: str
    name: str
    vendor: str
    arch: str
    compute_units: int | None  # None: any
    min_memory_gib: float = 0.0
    max_memory_gib: float = float("inf")
    min_clock_mhz: float = 0.0
    max_clock_mhz: float = float("inf")


PRODUCTS: tuple[Product, ...] = (
    # MI300X and MI325X share gfx942/304 CUs/2100 MHz; HBM size (192 vs 256 GB) tells them apart.
    Product("mi300x", "AMD Instinct MI300X", "amd", "gfx942", 304, max_memory_gib=224),
    Product("mi325x", "AMD Instinct MI325X", "amd", "gfx942", 304, min_memory_gib=224),
    Product("mi300a", "AMD Instinct MI300A", "amd", "gfx942", 228),
    # MI350X and MI355X share gfx950/256 CUs/288 GB; peak engine clock 2200 vs 2400 MHz.
    Product("mi350x", "AMD Instinct MI350X", "amd", "gfx950", 256, max_clock_mhz=2300),
    Product("mi355x", "AMD Instinct MI355X", "amd", "gfx950", 256, min_clock_mhz=2300),
    Product("mi250x", "AMD Instinct MI250X (one GCD)", "amd", "gfx90a", 110),
    Product("mi210", "AMD Instinct MI210", "amd", "gfx90a", 104),
    Product("h100", "NVIDIA H100 SXM", "nvidia", "sm_90", 132, max_memory_gib=100),
    Product("h200", "NVIDIA H200 SXM", "nvidia", "sm_90", 132, min_memory_gib=100),
    Product("b200", "NVIDIA B200", "nvidia", "sm_100", 148),
)

# HIP reports gcnArch as compute capability major.minor on AMD.
AMD_ARCH_BY_CAP: dict[tuple[int, int], str] = {(9, 4): "gfx942", (9, 5): "gfx950"}


def identify(vendor: str | None, arch: str | None, compute_units: int | None,
             clock_mhz: float | None, memory_bytes: int | None) -> Product | None:
    """The one product consistent with the device's properties, else None."""
    if vendor is None or arch is None:
        return None
    found = []
    for p in PRODUCTS:
        if p.vendor != vendor or p.arch != arch:
            continue
        if p.compute_units is not None and compute_units != p.compute_units:
            continue
        if p.min_memory_gib > 0 or p.max_memory_gib < float("inf"):
            if memory_bytes is None or not (
                    p.min_memory_gib <= memory_bytes / GIB < p.max_memory_gib):
                continue
        if p.min_clock_mhz > 0 or p.max_clock_mhz < float("inf"):
            if clock_mhz is None or not p.min_clock_mhz <= clock_mhz < p.max_clock_mhz:
                continue
        found.append(p)
    return found[0] if len(found) == 1 else None
