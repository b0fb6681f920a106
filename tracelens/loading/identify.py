"""Which GPU a device is, from what its trace says, against the table of products
(a load stage: :mod:`tracelens.loading.devices` calls it right after each file is read).

:func:`identify_device` takes the trace's own product name first (when it agrees with the
vendor, arch and SMs/CUs the trace gives), then what the trace says about the device
(:func:`identify`: arch, CUs, clock, memory; :func:`identify_by_capability` when the vendor
is not said); a device matching no row, or several, stays unidentified (null), never a guess.
The peaks of each product are :mod:`tracelens.core.hardware`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tracelens.core.hardware import GIB, SPECS, normalized


@dataclass(frozen=True)
class Product:
    """A row of the identification table (what a trace's device properties must match)."""

    spec_id: str
    name: str
    vendor: str
    arch: str
    compute_units: int | None  # None: any
    min_memory_gib: float = 0.0
    max_memory_gib: float = float("inf")
    min_clock_mhz: float = 0.0
    max_clock_mhz: float = float("inf")
    name_only: bool = False  # identified only from a name string (identify_by_name)


PRODUCTS: tuple[Product, ...] = (
    # MI300X and MI325X share gfx942/304 CUs/2100 MHz; HBM size (192 vs 256 GB) tells them apart.
    Product("mi300x", "AMD Instinct MI300X", "amd", "gfx942", 304, max_memory_gib=224),
    Product("mi325x", "AMD Instinct MI325X", "amd", "gfx942", 304, min_memory_gib=224),
    Product("mi300a", "AMD Instinct MI300A", "amd", "gfx942", 228),
    # MI350X and MI355X share gfx950/256 CUs/288 GB; peak engine clock 2200 vs 2400 MHz.
    Product("mi350x", "AMD Instinct MI350X", "amd", "gfx950", 256, max_clock_mhz=2300),
    Product("mi355x", "AMD Instinct MI355X", "amd", "gfx950", 256, min_clock_mhz=2300),
    Product("mi250x", "AMD Instinct MI250X (one GCD)", "amd", "gfx90a", 110),
    # An MI250 GCD (104 CUs, 64 GB, 1700 MHz) has the MI210's properties and per-device peaks:
    # only its name tells it apart. ROCm names PCI device 0x740C "AMD Instinct MI250X / MI250"
    # for both packages: the CUs decide (110: MI250X, 104: MI250; identify_by_name).
    Product("mi250", "AMD Instinct MI250 (one GCD)", "amd", "gfx90a", 104, name_only=True),
    Product("mi210", "AMD Instinct MI210", "amd", "gfx90a", 104),
    # GH200's GPU has H100's 132 SMs and 96 or 144 GB: only its name tells it apart
    # (identify_by_name); by properties alone a 132-SM sm_90 device stays H100 or H200.
    # The 80 GB H100 reports ~79.6 GiB, the H200 ~132 GiB; the 94 GB H100 NVL and the 96 GB
    # GH200 lie between and are told by name only: a 132-SM device of 85-100 GiB is unknown.
    Product("h100", "NVIDIA H100 SXM", "nvidia", "sm_90", 132, max_memory_gib=85),
    Product("h200", "NVIDIA H200 SXM", "nvidia", "sm_90", 132, min_memory_gib=100),
    Product("h100-pcie", "NVIDIA H100 PCIe", "nvidia", "sm_90", 114),
    Product("h100-nvl", "NVIDIA H100 NVL", "nvidia", "sm_90", 132, name_only=True),
    Product("h20", "NVIDIA H20 (96GB)", "nvidia", "sm_90", 78, max_memory_gib=100),
    Product("b200", "NVIDIA B200", "nvidia", "sm_100", 148),
    Product("gh200", "NVIDIA GH200 (96GB)", "nvidia", "sm_90", 132, name_only=True),
    # H800 has H100's 132 SMs and 80 GB: by properties it is an H100; only its name tells
    Product("h800", "NVIDIA H800", "nvidia", "sm_90", 132, name_only=True),
    # A100 SXM4 40 GB vs 80 GB by memory size (the PCIe cards have the same SMs and memory).
    Product("a100-40gb", "NVIDIA A100 40GB", "nvidia", "sm_80", 108, max_memory_gib=60),
    Product("a100", "NVIDIA A100 80GB", "nvidia", "sm_80", 108, min_memory_gib=60),
    # A800 is an A100 with NVLink cut to 400 GB/s: only its name tells them apart
    Product("a800-40gb", "NVIDIA A800 40GB", "nvidia", "sm_80", 108, max_memory_gib=60,
            name_only=True),
    Product("a800", "NVIDIA A800 80GB", "nvidia", "sm_80", 108, min_memory_gib=60,
            name_only=True),
    Product("mi308x", "AMD Instinct MI308X", "amd", "gfx942", 80),
    Product("v100", "NVIDIA V100", "nvidia", "sm_70", 80),
    Product("l40s", "NVIDIA L40S", "nvidia", "sm_89", 142),
    # Google TPUs: XSpace TPU planes name the chip (device_type_string ``TPU v5 Lite``) and
    # give no properties to match, so they are told by name only.
    Product("tpu-v4", "Google TPU v4", "google", "tpu-v4", None, name_only=True),
    Product("tpu-v5e", "Google TPU v5e", "google", "tpu-v5e", None, name_only=True),
    Product("tpu-v5p", "Google TPU v5p", "google", "tpu-v5p", None, name_only=True),
    Product("tpu-v6e", "Google TPU v6e (Trillium)", "google", "tpu-v6e", None, name_only=True),
    Product("tpu-v7", "Google TPU7x (Ironwood)", "google", "tpu-v7", None, name_only=True),
)

# HIP reports gcnArch as compute capability major.minor on AMD.
AMD_ARCH_BY_CAP: dict[tuple[int, int], str] = {(9, 4): "gfx942", (9, 5): "gfx950"}

# Words in a device name string (XSpace ``gpu_device_name``, a driver's marketing name)
# that say the vendor, for traces whose plane has no ``device_vendor`` stat (TensorFlow's).
_VENDOR_WORDS = {"nvidia": "nvidia", "tesla": "nvidia", "quadro": "nvidia",
                 "geforce": "nvidia", "amd": "amd", "instinct": "amd", "radeon": "amd"}


def vendor_from_name(name: str | None) -> str | None:
    """"nvidia" or "amd" when a word of the device name says so (``Tesla V100-SXM2-16GB``,
    ``AMD Instinct MI300X``, ``gfx942``), else None."""
    if not name:
        return None
    if re.match(r"^gfx[0-9a-f]+", name.strip().lower()):
        return "amd"
    found = {_VENDOR_WORDS[w] for w in re.split(r"[^a-z0-9]+", name.lower()) if w in
             _VENDOR_WORDS}
    return found.pop() if len(found) == 1 else None


def identify_by_name(name: str | None, memory_bytes: int | None = None,
                     vendor: str | None = None, arch: str | None = None,
                     compute_units: int | None = None) -> Product | None:
    """The one product whose model name (an alias of its spec: ``V100``, ``H100 PCIe``,
    ``A100 80GB``) is one to three consecutive words of the device's name, among those that
    agree with the properties given (:func:`agrees`). A name naming one model inside another's
    (``NVIDIA H100 NVL`` names ``H100`` inside ``H100 NVL``) is the longer one; a name naming
    two models side by side (ROCm's ``AMD Instinct MI250X / MI250``) is the one the
    properties agree with (110 or 104 CUs), else ambiguous; memory size decides between
    products named alike (``A100``: 40 vs 80 GB) and must then be known. None when no
    product or several match."""
    if not name:
        return None
    words = [normalized(w) for w in re.split(r"[^A-Za-z0-9]+", name) if w]
    spans: dict[str, list[tuple[int, int]]] = {}
    for n in (1, 2, 3):
        for i in range(len(words) - n + 1):
            spans.setdefault("".join(words[i:i + n]), []).append((i, i + n))
    named = {p: [s for a in map(normalized, SPECS[p.spec_id].aliases) for s in spans.get(a, ())]
             for p in PRODUCTS if agrees(p, vendor, arch, compute_units)}
    named = {p: s for p, s in named.items() if s}
    every = {s for found in named.values() for s in found}

    def inside_another(s: tuple[int, int]) -> bool:
        return any(t != s and t[0] <= s[0] and s[1] <= t[1] for t in every)

    found = [p for p, s in named.items() if not all(inside_another(x) for x in s)]
    if len(found) > 1:
        found = [p for p in found if memory_bytes is not None
                 and p.min_memory_gib <= memory_bytes / GIB < p.max_memory_gib]
    return found[0] if len(found) == 1 else None


def agrees(product: Product, vendor: str | None, arch: str | None,
           compute_units: int | None) -> bool:
    """The product a name says is consistent with the properties the trace gives (``NVIDIA
    H100 PCIe`` with 114 SMs is not the 132-SM H100 SXM a bare ``H100`` would be)."""
    return (vendor is None or product.vendor == vendor) and (
        arch is None or product.arch == arch) and (
        compute_units is None or product.compute_units is None
        or product.compute_units == compute_units)


def identify_device(name: str | None, vendor: str | None, arch: str | None,
                    compute_units: int | None, clock_mhz: float | None,
                    memory_bytes: int | None) -> tuple[Product | None, Product | None]:
    """Name first, then properties: (the product the device's own name says when it agrees
    with its properties, else the one its properties match (:func:`identify`), None). When
    the name names another model (``NVIDIA H800 PCIe`` on an H100 PCIe's properties) the
    table lacks that model: (None, the product the properties match, not used): the name
    stays, peaks unknown."""
    product = identify_by_name(name, memory_bytes, vendor, arch, compute_units) if name else None
    if product is None:
        product = identify(vendor, arch, compute_units, clock_mhz, memory_bytes)
        if product is not None and names_another_model(name, product):
            return None, product
    return product, None


def identify_by_capability(major: int, minor: int, compute_units: int | None,
                           clock_mhz: float | None, memory_bytes: int | None
                           ) -> Product | None:
    """A device whose trace gives no vendor (TensorFlow's XSpace planes): the one product its
    compute capability, SMs/CUs, clock and memory match under either vendor's reading of the
    capability (NVIDIA ``sm_<major><minor>``, AMD's gcnArch, :data:`AMD_ARCH_BY_CAP`); None
    when neither or both match (7.0 with 80 SMs is only a V100)."""
    found = [p for p in (identify("nvidia", f"sm_{major}{minor}", compute_units, clock_mhz,
                                  memory_bytes),
                         identify("amd", AMD_ARCH_BY_CAP.get((major, minor)), compute_units,
                                  clock_mhz, memory_bytes)) if p is not None]
    return found[0] if len(found) == 1 else None


# A word of a device name that names a GPU model (H800, A800, MI308X, V100, L40S), not a
# memory size, form factor or ISA (80GB, SXM4, HBM3, PCIe, gfx942)
_MODEL_WORD = re.compile(r"^[a-z]{1,3}\d{2,4}[a-z]{0,2}$")
_NOT_MODEL = re.compile(r"^(?:gfx|sxm|hbm|sm|pcie|nvl)")


def names_another_model(name: str | None, product: Product) -> bool:
    """The trace's device name names a model that is not ``product`` (``NVIDIA H800`` for
    properties that match an H100): the name, not the properties, says what the GPU is."""
    words = {w for w in re.split(r"[^a-z0-9]+", (name or "").lower())
             if _MODEL_WORD.match(w) and not _NOT_MODEL.match(w)}
    known = {normalized(a) for a in SPECS[product.spec_id].aliases} | {
        normalized(w) for w in re.split(r"[^A-Za-z0-9]+", product.name) if w}
    return bool(words) and not words & known


def identify(vendor: str | None, arch: str | None, compute_units: int | None,
             clock_mhz: float | None, memory_bytes: int | None) -> Product | None:
    """The one product consistent with the device's properties, else None."""
    if vendor is None or arch is None:
        return None
    found = []
    for p in PRODUCTS:
        if p.name_only or p.vendor != vendor or p.arch != arch:
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
