"""Words and numbers as ``summarize`` writes them (the full tables, the short output and the
report share them): milliseconds, shares, shortened kernel names, the filters, the MFU label.
Formatting only: every value comes from the typed result as its JSON rounds it."""

from __future__ import annotations

from tracelens.results.encode import written
from tracelens.results.filters import ActiveFilters, FilterValue, SummaryFilters
from tracelens.core.hardware import GpuSpec
from tracelens.results.summary import DeviceSummary, Headline, Summary, spec_view


def ms(ns: int | float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:,.3f}"


def pct(part: int | float, whole: int | float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def short_name(name: str, width: int = 80) -> str:
    """Keep the start and the end of a long kernel name (Tensile names run to 640 chars)."""
    if len(name) <= width:
        return name
    tail = width // 4
    return name[: width - tail - 1] + "…" + name[-tail:]


def filters_text(filters: ActiveFilters | SummaryFilters) -> str:
    """The filters in force (the JSON's ``filters``) in words, ``"; "`` between them: every
    number of the output is of what they keep, so the headline says them (empty: none)."""
    def text(key: str, value: FilterValue) -> str:
        if key == "time_ns" and isinstance(value, tuple):  # ns from the trace's zero
            a, b = (("" if v is None else ms(v)) for v in value)
            return f"time {a}–{b} ms" if a and b else f"time {a} ms–" if a else f"time –{b} ms"
        return f"{key} {', '.join(map(str, value)) if isinstance(value, tuple) else value}"
    return "; ".join(text(k, v) for k, v in filters.items() if v is not None and v != ())


def hosts_word(h: Headline) -> str:
    """"hosts", or "ranks" where the trace names no host (Kineto: ``rank<N>``, file names)."""
    return "hosts" if h.hosts_named else "ranks"


def _device_label(d: DeviceSummary, many_hosts: bool) -> str:
    return f"{d.host}/{d.device}" if many_hosts else str(d.device)


def shown(record: object, name: str) -> float | None:
    """A number of ``record`` as the JSON writes it (rounded as declared on the field): the
    tables show what the JSON says."""
    v = written(record, name)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _gbps(v: float | None) -> str:
    return "-" if v is None else f"{v:,.1f}"


def mfu_label(h: Headline) -> str:
    """What the headline MFU is, for every output that shows it (terminal, Markdown, HTML):
    the median step's with steps (of the median device when there are several), else over
    the span (``headline.mfu_basis``)."""
    many = h.active_devices > 1
    if h.mfu_basis == "median step":
        return "MFU (median step, median device)" if many else "MFU (median step)"
    return "MFU (median device)" if many else "MFU"


def _mfu_text(x: float | None, lower_bound: bool | None, short: bool = False) -> str:
    """MFU as a percentage, marked as a lower bound when some compute time has no FLOPs."""
    if x is None:
        return "-"
    if not lower_bound:
        return f"{100.0 * x:.1f}%"
    return f"≥{100.0 * x:.1f}%" if short else f"≥ {100.0 * x:.1f}% (lower bound: see warnings)"


def _coverage_text(h: Headline) -> str:
    """Share of compute-kernel time whose kernels carry FLOPs (docs/cost-model.md §9)."""
    cov = shown(h, "flops_coverage")
    return "-" if cov is None else f"{100.0 * cov:.1f}% of compute-kernel time has FLOPs"


def _has_peaks(spec: GpuSpec) -> bool:
    return bool(spec_view(spec).peak_tflops or spec.hbm_tb_per_s)


def peaks_unknown(s: Summary) -> list[str]:
    """The names of the active devices' products (or archs) that have no peak at all: no
    spec (a device the table lacks keeps its name) or a spec without FLOP or HBM peaks."""
    out: list[str] = []
    for d in s.devices:
        sp = d.spec
        if sp is not None and _has_peaks(sp):
            continue
        name = sp.name if sp is not None else d.product or d.arch
        if name and name not in out:
            out.append(name)
    return out


def _peaks_line(s: Summary) -> str:
    seen: dict[str, str] = {}
    for d in s.devices:
        sp = d.spec
        if sp is None or sp.id in seen:
            continue
        pk = spec_view(sp).peak_tflops
        parts = [f"{dt} {pk[dt]:g} TFLOP/s" for dt in ("bf16", "fp8") if pk.get(dt)]
        hbm = f"HBM {sp.hbm_tb_per_s:g} TB/s" if sp.hbm_tb_per_s else "HBM unknown"
        if pk or sp.hbm_tb_per_s:
            seen[sp.id] = f"{sp.name}: " + ", ".join(parts + [hbm])
    lines = list(seen.values()) + [f"{n}: peaks unknown" for n in peaks_unknown(s)]
    return "; ".join(lines)
