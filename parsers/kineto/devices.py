"""Device rows from Kineto's ``deviceProperties`` (one entry per visible GPU, by ``id``).

Kineto records ``name``, ``numSms`` (SMs, or CUs on ROCm), ``totalGlobalMem`` (bytes),
``computeMajor``/``computeMinor`` (on ROCm: HIP's gcnArch, 9.4 = gfx942) and ``warpSize``; no
clock. The vendor is NVIDIA when the name says so; AMD when the name says so, when the
document has ROCm keys (``roctracer_version``, ``hip_runtime_version``), or when the warp
size is 64 (NVIDIA GPUs have 32). Some ROCm builds write empty names (the vLLM traces): the
product is then identified from CUs, memory and gfx version alone, and a warning says so.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracelens import hardware
from tracelens.model import DEVICE_SCHEMA, conform

_ROCM_KEYS = ("roctracer_version", "hip_runtime_version", "hip_driver_version")


def _vendor(name: str, props: dict[str, Any], rocm: bool) -> str | None:
    low = name.lower()
    if "nvidia" in low:
        return "nvidia"
    if "amd" in low or "radeon" in low or "instinct" in low or rocm:
        return "amd"
    if props.get("warpSize") == 64:
        return "amd"
    if props.get("warpSize") == 32 and not rocm:
        return "nvidia"
    return None


def _arch(vendor: str | None, props: dict[str, Any]) -> str | None:
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    if not isinstance(major, int) or not isinstance(minor, int):
        return None
    if vendor == "nvidia":
        return f"sm_{major}{minor}"
    if vendor == "amd":
        return hardware.AMD_ARCH_BY_CAP.get((major, minor))  # 9.0 is several archs: unknown
    return None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def device_frame(doc: dict[str, Any], active: list[int], host: str
                 ) -> tuple[pl.DataFrame, list[str]]:
    """DEVICE_SCHEMA rows for the devices with activity (every listed device when none has
    any, so an idle rank still shows its GPUs), and identification warnings. A single
    ``deviceProperties`` entry describes a single active device whatever their ids."""
    raw = doc.get("deviceProperties")
    props = {p["id"]: p for p in raw if isinstance(p, dict) and isinstance(p.get("id"), int)} \
        if isinstance(raw, list) else {}
    rocm = any(k in doc for k in _ROCM_KEYS)
    wanted = active if active else sorted(props)
    rows, warnings = [], []
    missing = [d for d in wanted if d not in props]
    if len(props) == 1 and len(wanted) == 1 and missing:
        # a process that sees one GPU (HIP/CUDA_VISIBLE_DEVICES) lists it as id 0 while its
        # activity names the physical device: that one entry describes it
        (only,) = props.values()
        props = {wanted[0]: only}
        warnings.append(f"device {wanted[0]}: described by the only deviceProperties entry "
                        f"(id {only['id']}): the process saw one GPU")
        missing = []
    if missing:
        warnings.append(f"device(s) {', '.join(map(str, missing))} have no deviceProperties "
                        "entry: vendor, product and peaks unknown")
    for d in wanted:
        p = props.get(d, {})
        name = str(p.get("name") or "").strip()
        vendor = _vendor(name, p, rocm) if p else None
        arch = _arch(vendor, p)
        cus, mem = _int(p.get("numSms")), _int(p.get("totalGlobalMem"))
        product, unused = hardware.identify_device(name, vendor, arch, cus, None, mem)
        if unused is not None:
            warnings.append(f"device {d}: the trace names it {name!r}, which the peak table "
                            f"lacks; its properties match {unused.name}, not used: peaks "
                            "unknown")
        if p and product is not None and not name:
            warnings.append(f"device {d}: deviceProperties has an empty name; identified as "
                            f"{product.name} from {cus} CUs, {mem / hardware.GIB:.0f} GiB and "
                            f"compute capability {p.get('computeMajor')}."
                            f"{p.get('computeMinor')} ({arch})")
        elif p and product is None:
            warnings.append(f"device {d} ({name or 'no name'}, {arch or 'arch unknown'}, "
                            f"{cus} CUs/SMs, {mem} bytes) is not a known product: no "
                            "hardware spec")
        rows.append({"host": host, "rank": 0, "device": d, "vendor": vendor, "arch": arch,
                     "product": product.name if product else (name or None),
                     "compute_units": cus, "clock_mhz": None, "memory_bytes": mem,
                     "spec_id": product.spec_id if product else None})
    if not rows:
        return pl.DataFrame(schema=DEVICE_SCHEMA), warnings
    return conform(pl.DataFrame(rows, schema_overrides=DEVICE_SCHEMA, infer_schema_length=None),
                   DEVICE_SCHEMA), warnings
