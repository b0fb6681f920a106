"""`tracelens report` without a browser: escaping, size budget, sections, colours, the CLI.

The browser checks (rendering, console, network, script execution) are in
``test_report_browser.py``; both use the traces built here.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import tracelens
from tracelens_dev.writers.xspace import Activity, build_xspace
from reports.html import figures as F
from reports.html.page import SIZE_BUDGET_BYTES, plotly_js, render_html, script_json
from reports.html.palette import CATEGORY_COLORS, COLORS
from tests.conftest import GPU_TRACES, SAMPLES, real_trace
from tracelens.analyze.summary.build import summarize
from tracelens.cli.commands import main
from tracelens.core.hardware import GpuSpec
from tracelens.results.collectives import Collectives
from tracelens.results.summary import RooflineRow, Summary, TopKernel

SAMPLE = SAMPLES / "mi300x_8gpu_llama_step.xplane.pb"
OWN_BUDGET_BYTES = 250_000  # everything but plotly.js (docs/report.md)

# Each payload would leave a mark (window.__xss, the title, an <img>) if it ever ran.
XSS = {
    "script": "<script>window.__xss='script';document.title='XSS'</script>",
    "img": "\"><img src=x onerror=\"window.__xss='img'\">",
    "close": "</script><script>window.__xss='close'</script><!--",
    "plotly": "<b>bold</b> &amp; <a href=\"javascript:window.__xss='a'\">link</a><br>",
    "sep": "line\u2028sep\u2029para",
}
# Host names end up in file names too: no '/'.
XSS_HOSTS = ["hostA\"><img src=x onerror=window.__xss='hostA'>",
             "hostB<svg onload=window.__xss='hostB'>"]


def xss_activities() -> list[Activity]:
    acts = []
    for d in range(2):
        acts += [
            Activity(d, 1, "Cijk_" + XSS["script"], 100, 300, {"hlo_op": XSS["img"],
                                                               "hlo_module": XSS["close"]}),
            Activity(d, 1, "loop_fusion" + XSS["img"], 400, 100, {"hlo_op": XSS["script"]}),
            Activity(d, 1, XSS["close"], 500, 50, {"hlo_op": XSS["close"]}),
            Activity(d, 1, "k" + XSS["plotly"], 550, 40, {}),
            Activity(d, 1, "k" + XSS["sep"], 590, 30, {}),
            Activity(d, 2, "ncclDevKernel_Generic_4" + XSS["script"], 350, 300,
                     {"hlo_op": "all-reduce-start.1" + XSS["img"]}),
        ]
    return acts


def xss_logdir(tmp_path: Path) -> Path:
    """An XProf log dir of two hosts whose host, kernel, op and module names are payloads."""
    run = tmp_path / "logs" / "plugins" / "profile" / "run"
    run.mkdir(parents=True)
    for i, host in enumerate(XSS_HOSTS):
        (run / f"{host}.xplane.pb").write_bytes(build_xspace(
            xss_activities(), host=host, steps=[(0, 0, 700)],
            profile_start_ns=1_700_000_000_000_000_000 + 10 * i))
    return tmp_path / "logs"


def report_of(path: Path | list[Path], **kw: Any) -> tuple[Summary, Collectives, str]:
    summary = summarize(tracelens.load(path), top=100)
    return summary, summary.collectives, render_html(summary, **kw)


def with_cost_model(summary: Summary, coll: Collectives) -> tuple[Summary, Collectives]:
    """The summary as the cost model extends it (roofline, spec, MFU), built by hand, so the
    report's roofline/MFU/busbw parts are tested whatever the real trace carries."""
    spec = GpuSpec(id="mi300x", name="AMD Instinct MI300X", vendor="AMD", arch=None,
                   hbm_tb_per_s=5.3, link_gb_per_s=896.0,
                   peak_tflops={"fp32": 163.4, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9})
    devices = tuple(replace(d, spec=spec, mfu=0.3, mfu_dtype="bf16", steps=tuple(
        replace(st, mfu=0.30 + 0.01 * i) for i, st in enumerate(d.steps)))
        for d in summary.devices)
    rows = []
    for i, k in enumerate(summary.top_kernels):
        inten = [300.0, 120.0, 2.0, 0.25, 40.0, 800.0, 1.0, 9.0][i % 8]
        tf = min(900.0, inten * 5.3 * 0.6)
        rows.append(RooflineRow(
            op=f"fusion.{i}" + XSS["script"], program_id=None, module=XSS["close"],
            kernel=k.name, category=k.category, dtype="bf16", spec="mi300x", count=k.count,
            sum_ns=k.sum_ns, flops=1.0, bytes=1.0, intensity=inten, tflops_per_s=tf,
            tb_per_s=tf / inten, attainable_tflops_per_s=None,
            bound="memory" if inten < 246 else "compute", efficiency=0.6, no_cost_count=0))
    rows.append(RooflineRow(
        op="no-cost", program_id=None, module=None, kernel=None, category="gemm", dtype=None,
        spec=None, count=1, sum_ns=10, flops=None, bytes=None, intensity=None,
        tflops_per_s=None, tb_per_s=None, attainable_tflops_per_s=None, bound=None,
        efficiency=None, no_cost_count=1))
    def busbw(r: Any) -> Any:
        return replace(r, busbw=replace(r.busbw, median=160.0, p10=130.0, p90=170.0))
    c = replace(coll, by_type=tuple(map(busbw, coll.by_type)), ops=tuple(map(busbw, coll.ops)))
    # the headline MFU of a trace with steps: the median step's (the card says so)
    s = replace(summary, devices=devices, roofline=tuple(rows), collectives=c,
                headline=replace(summary.headline, mfu=0.3, mfu_basis="median step"),
                specs=(spec,))
    return s, c


def data_of(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="tl-data">(.*?)</script>', html, re.S)
    assert m
    return json.loads(m.group(1))


def own_part(html: str) -> str:
    return html.replace(plotly_js(), "")


# -- escaping ----------------------------------------------------------------------------------
def test_script_json_cannot_break_out() -> None:
    obj = {"a": "</script><!--<script>", "b": "x\u2028y\u2029z & <b>", "n": [1, 2.5, None]}
    text = script_json(obj)
    assert not re.search("[<>&\u2028\u2029]", text)
    assert json.loads(text) == obj


def test_plotly_text_is_entity_escaped() -> None:
    assert F.ptext("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"
    assert F.wrapped("<" * 200, 90).count("<br>") == 2  # only our own line breaks


def test_payloads_never_reach_the_page_raw(tmp_path: Path) -> None:
    _, _, html = report_of(xss_logdir(tmp_path))
    assert html.count("<script") == 3  # data, plotly.js, the page's own code
    assert html.count("</script>") == 3
    own = own_part(html)
    for p in [*XSS.values(), *XSS_HOSTS]:
        if p != XSS["sep"]:  # U+2028/9 are harmless in HTML, only JSON in a script matters
            assert p not in own, p
    for raw in ("<img", "<svg", "onerror=\"window", "<b>bold"):
        assert raw not in own, raw
    json_text = re.search(r'id="tl-data">(.*?)</script>', html, re.S).group(1)
    assert not re.search("[<>&\u2028\u2029]", json_text)
    # ...but they are all there, as text.
    assert "&lt;script&gt;window.__xss=&#39;script&#39;" in own  # jinja (tables, title)
    data = data_of(html)
    names = {k["name"] for k in data["kernels"]}
    assert "Cijk_" + XSS["script"] in names and XSS["close"] in names
    assert "k" + XSS["sep"] in names


# -- size, self-containment ------------------------------------------------------------------------
def test_sample_report_within_size_budget() -> None:
    _, _, html = report_of(SAMPLE)
    size = len(html.encode())
    assert size < SIZE_BUDGET_BYTES, size
    assert len(own_part(html).encode()) < OWN_BUDGET_BYTES
    assert html.count(plotly_js()) == 1


@pytest.mark.parametrize("key", sorted(GPU_TRACES))
def test_real_reports_within_size_budget(key: str) -> None:
    _, _, html = report_of(real_trace(GPU_TRACES[key]))
    assert len(html.encode()) < SIZE_BUDGET_BYTES
    assert len(own_part(html).encode()) < OWN_BUDGET_BYTES


def test_report_references_nothing_outside() -> None:
    _, _, html = report_of(SAMPLE)
    own = own_part(html)
    assert not re.search(r"<(script|img|link|iframe)[^>]*\s(src|href)=", own, re.I)
    assert "http://" not in own and "https://" not in own


# -- content -----------------------------------------------------------------------------------
def _figs(html: str) -> dict:
    return data_of(html)["figures"]


def test_sample_sections_and_figures() -> None:
    summary, _, html = report_of(SAMPLE)
    figs = _figs(html)
    assert {"timeline", "categories", "heatmap", "steps", "kernels", "coll_time"} <= set(figs)
    for sec in ("headline", "timeline", "categories", "heatmap", "steps", "kernels",
                "collectives", "warnings", "glossary"):
        assert f'<section id="{sec}">' in html
    assert len(re.findall(r'<div class="plot" id="fig-(\w+)"', html)) == len(figs)
    # Every bar of the per-device timeline adds up to the device's span.
    tl = figs["timeline"]
    for i, d in enumerate(summary.devices):
        total = sum(tr["x"][i] for tr in tl["data"])
        assert total == pytest.approx(d.timeline.span_ns / 1e6, abs=1e-3)


def test_sections_appear_only_with_their_data(tmp_path: Path) -> None:
    path = tmp_path / "one.xplane.pb"
    path.write_bytes(build_xspace([Activity(0, 1, "Cijk_x.kd", 0, 100, {})]))
    _, _, html = report_of(path)
    figs = _figs(html)
    assert set(figs) == {"timeline", "categories", "kernels"}
    for absent in ("heatmap", "steps", "collectives"):
        assert f'<section id="{absent}">' not in html
    # The roofline section says why it is empty (no costs) instead of drawing bare ceilings.
    if '<section id="roofline">' in html:
        assert "nothing to place on the roofline" in html


def test_empty_trace_renders(tmp_path: Path) -> None:
    path = tmp_path / "empty.xplane.pb"
    path.write_bytes(build_xspace([], device_stats={0: {"device_vendor": "AMD"}}))
    _, _, html = report_of(path)
    assert "No device activity in this trace." in html and _figs(html) == {}


def test_roofline_mfu_and_link_peak_from_cost_model_keys() -> None:
    summary, coll, _ = report_of(SAMPLE)
    s, c = with_cost_model(summary, coll)
    html = render_html(s)
    figs = _figs(html)
    roof = figs["roofline"]
    assert roof["layout"]["xaxis"]["type"] == "log" and roof["layout"]["yaxis"]["type"] == "log"
    lines = [t for t in roof["data"] if t["mode"] == "lines"]
    ceilings = [t for t in lines if "peak" in t["name"]]
    # fp16 and bf16 share 1307.4: one line; plus fp32 and fp8.
    assert len(ceilings) == 3
    assert any("bf16" in t["name"] and "fp16" in t["name"] for t in ceilings)
    for t in ceilings:  # flat at the peak, from the ridge point (peak / HBM) on
        assert t["y"][0] == t["y"][1] and t["x"][0] == pytest.approx(t["y"][0] / 5.3, rel=1e-4)
    slope = [t for t in lines if t["name"].startswith("HBM")]
    assert len(slope) == 1 and all(y / x == pytest.approx(5.3, rel=1e-4)
                                   for x, y in zip(slope[0]["x"], slope[0]["y"]))
    points = [t for t in roof["data"] if t["mode"] == "markers"]
    assert sum(len(t["x"]) for t in points) == len(s.roofline) - 1  # no-cost row skipped
    assert all(len(set(t["marker"]["size"])) >= 1 for t in points)
    assert "1 of " in html and "op groups are not plotted" in html
    assert 'id="mfu"' in html and "MFU (median step, median device)" in html \
        and "30.0%" in html
    assert any(t["name"] == "MFU (%)" for t in figs["steps"]["data"])
    bus = figs["coll_busbw"]
    assert bus["layout"]["shapes"][0]["x0"] == 896.0
    assert "spec link bandwidth 896 GB/s" in bus["layout"]["annotations"][0]["text"]
    assert "17.9%" in html  # 160 GB/s of 896 in the ops table


def test_category_colours_are_the_same_in_every_chart() -> None:
    summary, coll, _ = report_of(SAMPLE)
    s, c = with_cost_model(summary, coll)
    figs = _figs(render_html(s))
    seen: dict[str, set[str]] = {}
    for fig in figs.values():
        for tr in fig["data"]:
            col = (tr.get("marker") or {}).get("color")
            if isinstance(col, str) and tr.get("name") in CATEGORY_COLORS:
                seen.setdefault(tr["name"], set()).add(col)
    assert len(seen) >= 5
    assert all(cols == {CATEGORY_COLORS[name]} for name, cols in seen.items()), seen
    cats = figs["categories"]["data"][0]
    assert cats["marker"]["color"] == [CATEGORY_COLORS[n] for n in cats["y"]]
    names = {tr["name"]: tr["marker"]["color"] for tr in figs["timeline"]["data"]}
    assert names["exposed communication"] == CATEGORY_COLORS["collective"] == COLORS[
        "exposed_comm"]


def test_every_chart_names_its_units() -> None:
    summary, coll, _ = report_of(SAMPLE)
    s, c = with_cost_model(summary, coll)
    for name, fig in _figs(render_html(s)).items():
        titles = [fig["layout"][ax]["title"]["text"] for ax in ("xaxis", "yaxis")
                  if ax in fig["layout"]]
        assert any(re.search(r"\((ms|µs|s|GB/s|FLOP/byte|%)|TFLOP/s|% of", t)
                   for t in titles), (name, titles)


def test_long_kernel_names_are_shortened_in_charts_only() -> None:
    name = "Cijk_" + "A" * 700 + "_WGM1.kd"
    fig = F.kernels_figure([TopKernel(name=name, category="gemm", subcategory=None, rule="r",
                                      count=1, sum_ns=10, mean_ns=10.0, share_pct=100.0,
                                      devices=1)])
    label = fig["data"][0]["y"][0]
    assert len(label) <= F.LABEL_CHARS and label.endswith("_WGM1.kd") and "…" in label
    hover = fig["data"][0]["customdata"][0][0]
    assert hover.replace("<br>", "") == name


# -- command line -----------------------------------------------------------------------------
def test_cli_writes_only_the_output(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    trace = src / "t.xplane.pb"
    trace.write_bytes(SAMPLE.read_bytes())
    out = tmp_path / "out" / "r.html"
    out.parent.mkdir()
    res = CliRunner().invoke(main, ["report", str(trace), "-o", str(out), "--title",
                                    "<i>my</i> run", "--step", "1"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in src.iterdir()) == ["t.xplane.pb"]
    html = out.read_text()
    assert "<title>&lt;i&gt;my&lt;/i&gt; run</title>" in html
    assert "filtered to step 1" in html


@pytest.mark.parametrize("case", ["bad_input", "missing_dir", "output_is_input", "bad_step"])
def test_cli_errors_exit_2(tmp_path: Path, case: str) -> None:
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(b"\x00garbage")
    args = {"bad_input": [str(bad), "-o", str(tmp_path / "r.html")],
            "missing_dir": [str(SAMPLE), "-o", str(tmp_path / "nope" / "r.html")],
            "output_is_input": [str(bad), "-o", str(bad)],
            "bad_step": [str(SAMPLE), "-o", str(tmp_path / "r.html"), "--step", "99"]}[case]
    res = CliRunner().invoke(main, ["report", *args])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    if case in ("bad_input", "missing_dir"):
        line = res.stderr.strip().splitlines()[-1]
        assert re.match(r"error: .+: .+", line), line
    assert not (tmp_path / "r.html").exists()
    assert bad.read_bytes() == b"\x00garbage"


def test_title_tells_apart_inputs_of_the_same_name(tmp_path: Path) -> None:
    """One log directory per process: every file is ``vm.xplane.pb``, and the title read
    "vm.xplane.pb, vm.xplane.pb"."""
    data = Path(__file__).resolve().parent / "data" / "jax_2proc"
    out = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["report", str(data), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "<title>tracelens report — p0/…/vm.xplane.pb, p1/…/vm.xplane.pb</title>" in \
        out.read_text(encoding="utf-8")
