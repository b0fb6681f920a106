"""Device rows from Kineto's ``deviceProperties`` (one entry per visible GPU, by ``id``).

Kineto records ``name``, ``numSms`` (SMs, or CUs on ROCm), ``totalGlobalMem`` (bytes),
``computeMajor``/``computeMinor`` (on ROCm: HIP's gcnArch, 9.4 = gfx942) and ``warpSize``; no
clock. The vendor is NVIDIA when the name says so; AMD when the name says so, when the
document has ROCm keys (``roctracer_version``, ``hip_runtime_version``), or when the warp
size is 64 (NVIDIA GPUs have 32). These are the facts; :mod:`tracelens.loading.devices` identifies
the product (some ROCm builds write empty names, the vLLM traces: then from CUs, memory and
gfx version alone, and a warning says so).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracelens.core.model import DEVICE_FACTS_SCHEMA, Notice, conform

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


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _int64(v: Any) -> int | None:
    return v if isinstance(v, int) and -(1 << 63) <= v < (1 << 63) else None


def device_frame(doc: dict[str, Any], active: list[int], host: str, notes_at: int = 0
                 ) -> tuple[pl.DataFrame, list[Notice]]:
    """DEVICE_FACTS_SCHEMA rows for the devices with activity (every listed device when none
    has any, so an idle rank still shows its GPUs), and warnings about the entries. A single
    ``deviceProperties`` entry describes a single active device whatever their ids.
    ``notes_at``: how many warnings the file has before these (its identification notes
    follow them)."""
    raw = doc.get("deviceProperties")
    props = {p["id"]: p for p in raw if isinstance(p, dict) and isinstance(p.get("id"), int)} \
        if isinstance(raw, list) else {}
    rocm = any(k in doc for k in _ROCM_KEYS)
    wanted = active if active else sorted(props)
    rows: list[dict[str, Any]] = []
    warnings: list[Notice] = []
    missing = [d for d in wanted if d not in props]
    if len(props) == 1 and len(wanted) == 1 and missing:
        # a process that sees one GPU (HIP/CUDA_VISIBLE_DEVICES) lists it as id 0 while its
        # activity names the physical device: that one entry describes it
        (only,) = props.values()
        props = {wanted[0]: only}
        warnings.append(Notice.of("kineto.one_device_entry", "device {device}: described by "
                                  "the only deviceProperties entry (id {id}): the process saw "
                                  "one GPU", device=wanted[0], id=only["id"]))
        missing = []
    if missing:
        warnings.append(Notice.of("kineto.no_device_entry", "device(s) {devices} have no "
                                  "deviceProperties entry: vendor, product and peaks unknown",
                                  devices=", ".join(map(str, missing))))
    for d in wanted:
        p = props.get(d, {})
        name = str(p.get("name") or "").strip()
        major, minor = p.get("computeMajor"), p.get("computeMinor")
        rows.append({"host": host, "rank": 0, "device": d, "name": name or None,
                     "vendor": _vendor(name, p, rocm) if p else None,
                     "compute_major": _int64(major), "compute_minor": _int64(minor),
                     "compute_units": _int(p.get("numSms")),
                     "memory_bytes": _int(p.get("totalGlobalMem")), "described": bool(p),
                     "notes_at": notes_at + len(warnings)})
    if not rows:
        return pl.DataFrame(schema=DEVICE_FACTS_SCHEMA), warnings
    return conform(pl.DataFrame(rows, schema_overrides=DEVICE_FACTS_SCHEMA,
                                infer_schema_length=None), DEVICE_FACTS_SCHEMA), warnings
