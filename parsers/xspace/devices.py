"""One DEVICE_SCHEMA row from a GPU plane's stats: vendor, arch, CUs, clock, memory and the
product, from the capability stats or the device's own name string."""

from __future__ import annotations

import re
from typing import Any

from parsers.xspace.columns import INT64_MAX
from tracelens import hardware

_NAME_STATS = ("gpu_device_name", "device_name")  # plane stats that name the device


def _int_stat(stats: dict[str, Any], key: str, lo: int, hi: int, bad: list[str]) -> int | None:
    """An integer plane stat inside [lo, hi]; a value of another type or out of range is
    unknown (None) and its key is listed in ``bad`` so the caller can say so."""
    v = stats.get(key)
    if v is None:
        return None
    if type(v) is int and lo <= v <= hi:
        return v
    bad.append(key)
    return None


def device_row(ordinal: int, stats: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """One DEVICE_SCHEMA row from a GPU plane's stats, and the stats that could not be used.

    The product comes from the identification table (vendor, arch, CUs, clock, memory), else
    from the device's own name string (``gpu_device_name``: e.g. ``Tesla V100-SXM2-16GB``),
    which also says the vendor when the plane lacks ``device_vendor`` (TensorFlow traces)."""
    bad: list[str] = []
    names = [stats[k].strip() for k in _NAME_STATS if isinstance(stats.get(k), str)
             and stats[k].strip()]
    dev_name = names[0] if names else None
    vendor_raw = str(stats.get("device_vendor") or "").lower()
    vendor = {"amd": "amd", "nvidia": "nvidia"}.get(vendor_raw) or (
        None if vendor_raw else hardware.vendor_from_name(dev_name))
    major = _int_stat(stats, "compute_cap_major", 0, 2**31 - 1, bad)
    minor = _int_stat(stats, "compute_cap_minor", 0, 2**31 - 1, bad)
    arch = None
    gfx = re.match(r"^gfx[0-9a-f]+", dev_name) if dev_name else None
    if gfx:
        arch = gfx.group(0)
    elif vendor == "amd" and major is not None and minor is not None:
        arch = hardware.AMD_ARCH_BY_CAP.get((major, minor))
    elif vendor == "nvidia" and major is not None and minor is not None:
        arch = f"sm_{major}{minor}"
    clock_khz = stats.get("clock_rate")
    clock_mhz = None
    if clock_khz is not None:
        if type(clock_khz) in (int, float) and 0 < clock_khz < float("inf") \
                and clock_khz <= INT64_MAX:
            clock_mhz = float(clock_khz) / 1000.0
        else:
            bad.append("clock_rate")
    cus = _int_stat(stats, "core_count", 0, 2**31 - 1, bad)
    mem = _int_stat(stats, "memory_size", 0, INT64_MAX, bad)
    product = hardware.identify(vendor, arch, cus, clock_mhz, mem)
    if product is None and dev_name and not gfx:
        named = hardware.identify_by_name(dev_name, mem)
        product = named if named is not None and named.vendor == vendor and (
            arch is None or named.arch == arch) else None
    row = {"device": ordinal, "vendor": vendor or (vendor_raw or None), "arch": arch,
           "product": product.name if product else (
               dev_name if dev_name and not gfx else None),
           "compute_units": cus, "clock_mhz": clock_mhz, "memory_bytes": mem,
           "spec_id": product.spec_id if product else None}
    return row, bad
