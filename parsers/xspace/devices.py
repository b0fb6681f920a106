"""One DEVICE_FACTS_SCHEMA row from a GPU plane's stats: the device's name string, vendor,
capability, cores, clock, memory and reported bandwidth (:mod:`tracelens.loading.devices` identifies
the product from them)."""

from __future__ import annotations

from typing import Any

from parsers.xspace.columns import INT64_MAX

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
    """One DEVICE_FACTS_SCHEMA row (less host, rank and where its notes go) from a GPU
    plane's stats, and the stats that could not be used. ``name``: the device's own name
    string (``gpu_device_name``: ``Tesla V100-SXM2-16GB``, ``NVIDIA H800``; ROCm writes the
    gfx target there); ``vendor``: ``device_vendor`` as written, in lower case."""
    bad: list[str] = []
    names = [stats[k].strip() for k in _NAME_STATS if isinstance(stats.get(k), str)
             and stats[k].strip()]
    major = _int_stat(stats, "compute_cap_major", 0, 2**31 - 1, bad)
    minor = _int_stat(stats, "compute_cap_minor", 0, 2**31 - 1, bad)
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
    bw = stats.get("memory_bandwidth")  # ROCm's is about half the real HBM rate: never a peak
    row = {"device": ordinal, "name": names[0] if names else None,
           "vendor": str(stats.get("device_vendor") or "").lower() or None,
           "compute_major": major, "compute_minor": minor, "compute_units": cus,
           "clock_mhz": clock_mhz, "memory_bytes": mem,
           "memory_bandwidth": float(bw) if type(bw) in (int, float) else None}
    return row, bad
