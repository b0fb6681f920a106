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


def device_row(ordinal: int, stats: dict[str, Any]
               ) -> tuple[dict[str, Any], list[str], str | None]:
    """One DEVICE_SCHEMA row from a GPU plane's stats, the stats that could not be used, and
    how the product was found when the reader should say so (else None).

    Name first (:func:`tracelens.hardware.identify_device`): the device's own name string
    (``gpu_device_name``: ``Tesla V100-SXM2-16GB``, ``NVIDIA H800``; ROCm writes the gfx
    target there, which names no product) when it agrees with the capability stats, else the
    product those stats match. The name also says the vendor when the plane lacks
    ``device_vendor`` (TensorFlow traces); without either, the compute capability is read
    for both vendors and a product only one reading matches is used
    (:func:`tracelens.hardware.identify_by_capability`)."""
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
    product_name = dev_name if dev_name and not gfx else None
    product, unused = hardware.identify_device(product_name, vendor, arch, cus, clock_mhz, mem)
    how = None
    if unused is not None:
        how = f"named {product_name!r}, which the peak table lacks (its stats match " \
              f"{unused.name}, not used): peaks unknown"
    elif product is None and vendor is None and not vendor_raw and major is not None \
            and minor is not None:
        product = hardware.identify_by_capability(major, minor, cus, clock_mhz, mem)
        if product is not None:
            vendor, arch = product.vendor, product.arch
            how = (f"no device_vendor stat: identified as {product.name} from compute "
                   f"capability {major}.{minor} and {cus} cores, which only "
                   f"{'NVIDIA' if vendor == 'nvidia' else 'AMD'}'s reading matches")
    row = {"device": ordinal, "vendor": vendor or (vendor_raw or None), "arch": arch,
           "product": product.name if product else product_name,
           "compute_units": cus, "clock_mhz": clock_mhz, "memory_bytes": mem,
           "spec_id": product.spec_id if product else None}
    return row, bad, how


_PROPS = ("arch", "compute_units", "clock_mhz", "memory_bytes")


def share_identification(rows: list[dict[str, Any]]) -> list[tuple[list[int], str, list[int],
                                                                     list[str]]]:
    """Identify, in place, each unidentified GPU row of one file whose plane stats are a part
    of an identified sibling's: same vendor, and every property it gives (arch, cores, clock,
    memory) equal. Collectors write full stats only on some planes (the 7 idle planes of a
    real MI355X trace say only ``device_vendor=AMD``); the same job's other planes with the
    same stats say what the device is. Used only when every such sibling names one product.
    Returns (devices, product, the siblings, the properties they lacked) per product."""
    known = [r for r in rows if r["spec_id"] is not None]
    shared: dict[str, tuple[list[int], list[int], set[str]]] = {}
    for r in rows:
        if r["spec_id"] is not None or r["product"] is not None or r["vendor"] not in (
                "amd", "nvidia"):
            continue  # identified, or named by its own plane: that name stays
        like = [k for k in known if k["vendor"] == r["vendor"] and all(
            r[p] is None or r[p] == k[p] for p in _PROPS)]
        if not like or len({k["spec_id"] for k in like}) != 1:
            continue
        devs, sibs, missing = shared.setdefault(like[0]["product"], ([], [], set()))
        devs.append(r["device"])
        sibs.extend(k["device"] for k in like if k["device"] not in sibs)
        missing.update(p for p in _PROPS if r[p] is None)
        # the product fixes the arch; cores, clock and memory stay the plane's own (unknown)
        r["product"], r["spec_id"] = like[0]["product"], like[0]["spec_id"]
        r["arch"] = r["arch"] or like[0]["arch"]
    return [(devs, product, sorted(sibs), [p for p in _PROPS if p in missing])
            for product, (devs, sibs, missing) in shared.items()]
