"""Device identification, a load stage of the core: readers hand over what a trace
says about each GPU (``DEVICE_FACTS_SCHEMA``: names, vendor, arch, capability, CUs, clock,
memory), this finds the product and its spec in :mod:`tracelens.core.hardware` and turns the frame
into ``DEVICE_SCHEMA`` rows, right after each file is read
(:func:`tracelens.loading.reading.file_stages`, in threads, worker processes and Dask workers
alike).

Name first, then properties (:func:`tracelens.loading.identify.identify_device`). What cannot be
identified is warned, each note where the reader's own warnings put it (``notes_at``), so the
warnings keep the order of the file. How each format's facts are read, and how its notes name
a device, follow the format: Kineto ``device N``, rocprofv3 ``GPU agent N``, XSpace
``devices 0-7`` (grouped; a TensorFlow plane without a vendor is read by its capability for
both vendors, and idle planes share an identified sibling's product).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import polars as pl

from tracelens.core import hardware

from tracelens.loading import identify
from tracelens.core.model import DEVICE_FACTS_SCHEMA, DEVICE_SCHEMA, Notice, Trace, conform

Row = dict[str, Any]
Note = tuple[int, int, Notice]  # (where in the file's notices, rank, the notice)


def identify_devices(trace: Trace) -> None:
    """:func:`device_notes`, its notes inserted into the trace's notices."""
    insert_notes(trace.meta.notices, device_notes(trace))


def device_notes(trace: Trace) -> list[Note]:
    """Replace a reader's device facts with identified ``DEVICE_SCHEMA`` rows; the notes to
    insert into its warnings (:func:`insert_notes`). A trace whose devices are identified
    already (built by hand, or read back) is left as it is."""
    if "notes_at" not in trace.devices.columns:
        return []
    source = trace.meta.sources[0] if trace.meta.sources else {}
    trace.devices, notes = identify_frame(trace.devices, source.get("format", ""),
                                          Path(source.get("path", "")).name)
    return notes


def identify_frame(facts: pl.DataFrame, fmt: str, file_name: str
                   ) -> tuple[pl.DataFrame, list[Note]]:
    """One file's ``DEVICE_FACTS_SCHEMA`` frame (format ``fmt``) as ``DEVICE_SCHEMA`` rows,
    and the notes to warn (each with its place in the file's warnings)."""
    rows, notes = _RULES[fmt](conform(facts, DEVICE_FACTS_SCHEMA).rows(named=True), file_name)
    keep = [{k: r[k] for k in DEVICE_SCHEMA} for r in rows]
    frame = conform(pl.DataFrame(keep, schema_overrides=DEVICE_SCHEMA,
                                 infer_schema_length=None), DEVICE_SCHEMA) \
        if keep else pl.DataFrame(schema=DEVICE_SCHEMA)
    return frame, notes


def insert_notes(notices: list[Notice], notes: list[Note]) -> None:
    """Each note at its place: positions count the reader's notices; at one place, lower
    ranks first, and notes of one rank in the order given. A notice given already is not
    repeated (``TraceMeta.warn``'s rule)."""
    shift = 0
    for pos, _, notice in sorted(notes, key=lambda n: n[:2]):
        if notice in notices:
            continue
        notices.insert(pos + shift, notice)
        shift += 1


def capability_arch(vendor: str | None, major: int | None, minor: int | None) -> str | None:
    """``sm_90`` from NVIDIA's compute capability 9.0; AMD's (HIP's gcnArch) through the
    table (9.0 is several archs: unknown)."""
    if major is None or minor is None:
        return None
    if vendor == "nvidia":
        return f"sm_{major}{minor}"
    if vendor == "amd":
        return identify.AMD_ARCH_BY_CAP.get((major, minor))
    return None


def _row(r: Row, vendor: str | None, arch: str | None, product: identify.Product | None,
         fallback: str | None) -> Row:
    return {"host": r["host"], "rank": r["rank"], "device": r["device"], "vendor": vendor,
            "arch": arch, "product": product.name if product else fallback,
            "compute_units": r["compute_units"], "clock_mhz": r["clock_mhz"],
            "memory_bytes": r["memory_bytes"], "spec_id": product.spec_id if product else None,
            "peak_tflops": r.get("peak_tflops"), "peak_hbm_tb_per_s": r.get("peak_hbm_tb_per_s")}


def _kineto(facts: list[Row], file: str) -> tuple[list[Row], list[Note]]:
    """Kineto ``deviceProperties``: no clock; an empty name (some ROCm builds) is identified
    from CUs, memory and gfx version alone, and said."""
    rows, notes = [], []
    for r in facts:
        d, name, vendor, pos = r["device"], r["name"] or "", r["vendor"], r["notes_at"]
        arch = capability_arch(vendor, r["compute_major"], r["compute_minor"])
        cus, mem = r["compute_units"], r["memory_bytes"]
        product, unused = identify.identify_device(name, vendor, arch, cus, None, mem)
        if unused is not None:
            notes.append((pos, 0, Notice.of(
                "devices.unlisted_name", "{file}: device {device}: the trace names it "
                "{name!r}, which the peak table lacks; its properties match {like}, not used: "
                "peaks unknown", file=file, device=d, name=name, like=unused.name)))
        if r["described"] and product is not None and not name:
            notes.append((pos, 0, Notice.of(
                "devices.empty_name", "{file}: device {device}: deviceProperties has an empty "
                "name; identified as {product} from {cus} CUs, {gib:.0f} GiB and compute "
                "capability {major}.{minor} ({arch})", file=file, device=d,
                product=product.name, cus=cus, gib=mem / hardware.GIB,
                major=r["compute_major"], minor=r["compute_minor"], arch=arch)))
        elif r["described"] and product is None:
            notes.append((pos, 0, Notice.of(
                "devices.unknown_product", "{file}: device {device} ({name}, {arch}, {cus} "
                "CUs/SMs, {mem} bytes) is not a known product: no hardware spec", file=file,
                device=d, name=name or "no name", arch=arch or "arch unknown", cus=cus,
                mem=mem)))
        rows.append(_row(r, vendor, arch, product, name or None))
    return rows, notes


def _rocprof(facts: list[Row], file: str) -> tuple[list[Row], list[Note]]:
    """rocprofv3 GPU agents: the driver's marketing name, the gfx target, CUs and clock."""
    rows, notes = [], []
    for r in facts:
        name, arch, cus, clock = r["name"], r["arch"], r["compute_units"], r["clock_mhz"]
        pos, rank = r["notes_at"], r["rank"]
        product, unused = identify.identify_device(name, r["vendor"], arch, cus, clock,
                                                   r["memory_bytes"])
        if unused is not None:
            notes.append((pos, rank, Notice.of(
                "devices.unlisted_agent_name", "{file}: GPU agent {agent}: the trace names it "
                "{name!r}, which the peak table lacks; its properties match {like}, not used: "
                "peaks unknown", file=file, agent=r["agent"], name=name, like=unused.name)))
        elif product is None and (arch or name or cus):  # else nothing is known
            notes.append((pos, rank, Notice.of(
                "devices.unknown_agent", "{file}: GPU agent {agent} ({name}, {cus} CUs, "
                "{clock} MHz) is not a known product: no hardware spec", file=file,
                agent=r["agent"], name=name or arch or "unknown", cus=cus, clock=clock)))
        rows.append(_row(r, r["vendor"], arch, product, name))
    return rows, notes


def _xspace_one(r: Row) -> tuple[Row, Notice | None]:
    """One GPU plane: its row, and how the product was found when that should be said.

    The device's own name string (``Tesla V100-SXM2-16GB``; ROCm writes the gfx target there,
    which names no product) when it agrees with the capability stats, else the product those
    stats match. The name also says the vendor when the plane lacks ``device_vendor``
    (TensorFlow traces); without either, the compute capability is read for both vendors and a
    product only one reading matches is used
    (:func:`tracelens.loading.identify.identify_by_capability`)."""
    dev_name, vendor_raw = r["name"], r["vendor"] or ""
    vendor = {"amd": "amd", "nvidia": "nvidia", "google": "google"}.get(vendor_raw) or (
        None if vendor_raw else identify.vendor_from_name(dev_name))
    major, minor = r["compute_major"], r["compute_minor"]
    gfx = re.match(r"^gfx[0-9a-f]+", dev_name) if dev_name else None
    arch = gfx.group(0) if gfx else capability_arch(vendor, major, minor)
    cus, clock_mhz, mem = r["compute_units"], r["clock_mhz"], r["memory_bytes"]
    product_name = dev_name if dev_name and not gfx else None
    product, unused = identify.identify_device(product_name, vendor, arch, cus, clock_mhz, mem)
    how = None
    if unused is not None:
        how = Notice.of("devices.unlisted_plane_name", "named {name!r}, which the peak table "
                        "lacks (its stats match {like}, not used): peaks unknown",
                        name=product_name, like=unused.name)
    elif product is None and vendor is None and not vendor_raw and major is not None \
            and minor is not None:
        product = identify.identify_by_capability(major, minor, cus, clock_mhz, mem)
        if product is not None:
            vendor, arch = product.vendor, product.arch
            how = Notice.of("devices.by_capability", "no device_vendor stat: identified as "
                            "{product} from compute capability {major}.{minor} and {cus} "
                            "cores, which only {vendor}'s reading matches",
                            product=product.name, major=major, minor=minor, cus=cus,
                            vendor="NVIDIA" if vendor == "nvidia" else "AMD")
    row = _row(r, vendor or (vendor_raw or None), arch, product, product_name)
    if vendor == "google" and product_name:  # a TPU is named as its trace names it (issue
        row["product"] = product_name  # 48: "TPU v5 Lite"); the table's entry gives the spec
    return row, how


def _xspace(facts: list[Row], file: str) -> tuple[list[Row], list[Note]]:
    """XSpace GPU planes, then what several planes of the file share; XLA:CPU devices (the
    reader's ``role`` "cpu") pass as they are."""
    gpus = [r for r in facts if r["role"] != "cpu"]
    rows: list[Row] = []
    notes: list[Note] = []
    found: dict[Notice, list[int]] = {}
    for r in gpus:
        row, how = _xspace_one(r)
        rows.append(row)
        if how:
            found.setdefault(how, []).append(r["device"])
        # ROCm's memory_bandwidth is about half the real HBM rate: never a peak, but say so
        bw = hardware.reported_bandwidth_warning(row["spec_id"], r["memory_bandwidth"])
        if bw:
            notes.append((r["notes_at"], r["rank"], bw.about(file)))
    at = max((r["file_notes_at"] for r in gpus), default=0)
    notes += [(at, 0, Notice(how.code, "{file}: {devices}: " + how.template, (
        ("file", file), ("devices", devices_text(ordinals)), *how.fields)))
        for how, ordinals in found.items()]
    for ordinals, product, like, missing in share_identification(rows):
        notes.append((at, 0, Notice.of(
            "devices.like_sibling", "{file}: {devices}: identified as {product} like {like} of "
            "the same file, whose plane stats agree with every stat theirs give (theirs lack "
            "{lack})", file=file, devices=devices_text(ordinals), product=product,
            like=devices_text(like), lack=", ".join(missing) or "nothing")))
    listed = [row for row, r in zip(rows, gpus) if r["role"] != "replaced"]
    cpus = [_row(r, r["vendor"], r["arch"], None, r["name"]) for r in facts if r["role"] == "cpu"]
    return listed + cpus, notes


def devices_text(ordinals: list[int]) -> str:
    """``device 3`` or ``devices 1-7`` / ``devices 0, 2`` (GPU ordinals of one file)."""
    o = sorted(ordinals)
    if len(o) == 1:
        return f"device {o[0]}"
    if o == list(range(o[0], o[-1] + 1)):
        return f"devices {o[0]}-{o[-1]}"
    return "devices " + ", ".join(map(str, o))


_PROPS = ("arch", "compute_units", "clock_mhz", "memory_bytes")


def share_identification(rows: list[Row]) -> list[tuple[list[int], str, list[int], list[str]]]:
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


_Rule = Callable[[list[Row], str], tuple[list[Row], list[Note]]]
_RULES: dict[str, _Rule] = {"xspace": _xspace, "kineto": _kineto, "rocpd": _rocprof,
                            "rpd": _rocprof, "rocprof-json": _rocprof, "rocprof-csv": _rocprof}
"""How each format's facts are identified (the format a reader writes in ``meta.sources``)."""
