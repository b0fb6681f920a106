"""`tracelens report` in a real browser: headless Chromium (Debian package) over the DevTools
protocol (``tests/browser.py``, standard library only, nothing downloaded).

For every report: the page loads with no console error or warning and no uncaught exception,
makes no network request (``Network.requestWillBeSent`` for anything but the file itself;
``data:`` URLs plotly makes for heat-map images never leave the page), every plot div has a
rendered plotly SVG with traces, and a full-page screenshot lands in ``artifacts/``. The XSS
report additionally proves that no payload ran and that every payload is shown as text.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from reports.html import figures as F
from reports.html.page import render_html
from tests.browser import Browser, find_chromium
from tests.conftest import CPU_TRACE, GPU_TRACES, REAL_XPROF, ROOT, SAMPLES
from tests.test_report import XSS, XSS_HOSTS, report_of, with_cost_model, xss_logdir

ARTIFACTS = ROOT / "artifacts"
READY = "window.__tracelensReady === true"

PAGE_STATE = """(function () {
  var divs = Array.prototype.slice.call(document.querySelectorAll("div.plot[data-fig]"));
  var data = JSON.parse(document.getElementById("tl-data").textContent);
  return {
    divs: divs.map(function (d) { return d.getAttribute("data-fig"); }),
    figures: Object.keys(data.figures),
    rendered: divs.filter(function (d) {
      var svg = d.querySelector("svg.main-svg");
      var box = svg && svg.getBoundingClientRect();
      return box && box.width > 100 && box.height > 100 &&
        d.querySelectorAll("g.trace, g.hm").length > 0;
    }).map(function (d) { return d.getAttribute("data-fig"); }),
    xss: window.__xss === undefined ? null : String(window.__xss),
    title: document.title,
    images: document.images.length,
    scripts: document.scripts.length,
    handlers: document.querySelectorAll("[onerror],[onload],[onclick]").length,
    jsLinks: document.querySelectorAll("a[href^='javascript']").length,
    kernelRows: document.querySelectorAll("#kernel-table tbody tr").length,
    text: document.body.innerText
  };
}())"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    exe = find_chromium()
    if exe is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium; .ci/run "
                    "installs it when apt can reach a mirror)")
    b = Browser(exe, width=1280, height=900)
    try:
        yield b
    finally:
        b.close()


def load_page(browser: Browser, html: str, tmp: Path, name: str) -> dict[str, Any]:
    """Open the report, check what every report must satisfy, screenshot it."""
    path = tmp / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    uri = path.resolve().as_uri()
    browser.open(uri, READY, timeout=60)
    time.sleep(0.2)  # let anything asynchronous (an <img> error handler) have its chance
    state = browser.evaluate(PAGE_STATE)
    browser.screenshot(ARTIFACTS / f"report_{name}.png")
    assert browser.errors() == [], browser.errors()
    others = [u for u in browser.requests() if u != uri and not u.startswith("data:")]
    assert others == [], others
    assert state["divs"] and sorted(state["divs"]) == sorted(state["figures"])
    assert sorted(state["rendered"]) == sorted(state["figures"]), state["rendered"]
    assert state["scripts"] == 3 and state["images"] == 0 and state["handlers"] == 0
    assert state["xss"] is None
    return state


def test_sample_report(browser: Browser, tmp_path: Path) -> None:
    summary, _, html = report_of(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    state = load_page(browser, html, tmp_path, "sample")
    assert {"timeline", "categories", "heatmap", "steps", "kernels", "coll_time"} <= set(
        state["rendered"])
    assert state["kernelRows"] == len(summary.top_kernels)
    # The report opens with the findings (issue 47): the first section, shown, its items the
    # summary's in rank order, each with its projected saving.
    first = browser.evaluate("""(function () {
      var s = document.querySelector("main > section");
      var box = s.getBoundingClientRect();
      return {id: s.id, visible: box.height > 0 && box.top < window.innerHeight,
              items: Array.prototype.map.call(s.querySelectorAll("ol.findings > li > strong"),
                                              function (e) { return e.textContent; })};
    }())""")
    assert first["id"] == "findings" and first["visible"], first
    assert first["items"] == [f.title for f in summary.findings.items]
    # The table sorts and filters.
    browser.evaluate("""(function () {
      var f = document.getElementById("kernel-filter"); f.value = "tensile";
      f.dispatchEvent(new Event("input")); }())""")
    rows = browser.evaluate("""Array.prototype.map.call(
      document.querySelectorAll("#kernel-table tbody tr"),
      function (tr) { return tr.cells[7].textContent; })""")
    assert rows and all("tensile" in r for r in rows)
    browser.evaluate("""(function () {
      var f = document.getElementById("kernel-filter"); f.value = "";
      f.dispatchEvent(new Event("input"));
      document.querySelector("#kernel-table th[data-key='mean_us']").click(); }())""")
    means = browser.evaluate("""Array.prototype.map.call(
      document.querySelectorAll("#kernel-table tbody tr"),
      function (tr) { return parseFloat(tr.cells[4].textContent.replace(/,/g, "")); })""")
    assert means == sorted(means, reverse=True) and len(means) == len(summary.top_kernels)


def test_report_with_cost_model_keys(browser: Browser, tmp_path: Path) -> None:
    summary, coll, _ = report_of(SAMPLES / "mi300x_8gpu_llama_step.xplane.pb")
    s, c = with_cost_model(summary, coll)
    state = load_page(browser, render_html(s), tmp_path, "cost_model")
    assert {"roofline", "coll_busbw", "steps"} <= set(state["rendered"])
    # Roofline hover: op, module and kernel names as text (the op names carry a payload).
    hover = browser.evaluate("""(function () {
      var div = document.getElementById("fig-roofline");
      var n = div.data.findIndex(function (t) { return t.mode === "markers"; });
      Plotly.Fx.hover(div, [{curveNumber: n, pointNumber: 0}]);
      var h = div.querySelector(".hovertext"); return h ? h.textContent : null; }())""")
    assert hover and XSS["script"] in hover and XSS["close"] in hover
    assert browser.evaluate("window.__xss === undefined")


REAL = {**GPU_TRACES, "cpu_dp4": CPU_TRACE}


@pytest.mark.parametrize("key", sorted(REAL))
def test_real_trace_report(browser: Browser, tmp_path: Path, key: str) -> None:
    path = REAL_XPROF / REAL[key]
    if not path.exists():
        pytest.skip(f"real trace {path} not present (shared/ is not beside this checkout)")
    summary, _, html = report_of(path)
    state = load_page(browser, html, tmp_path, key)
    assert {"timeline", "categories", "kernels"} <= set(state["rendered"])
    if len(summary.devices) > 1:
        assert "heatmap" in state["rendered"]
    if any(d.steps for d in summary.devices):
        assert "steps" in state["rendered"]
    if any(isinstance(r.intensity, float) and r.intensity > 0
           and (r.tflops_per_s or 0) > 0 for r in summary.roofline):
        assert "roofline" in state["rendered"]


def test_xss_payloads_stay_text(browser: Browser, tmp_path: Path) -> None:
    logdir = xss_logdir(tmp_path)
    summary, _, html = report_of(logdir)
    assert summary.headline.hosts == 2
    state = load_page(browser, html, tmp_path, "xss")
    assert state["xss"] is None and state["jsLinks"] == 0
    assert state["title"].startswith("tracelens report — ") and "XSS" != state["title"]
    assert XSS_HOSTS[0] in state["title"]  # the file name, shown as text
    text = state["text"]
    for p in (XSS["script"], XSS["img"], XSS["close"], XSS["plotly"]):
        assert p in text, p  # the kernel table (textContent) and the tables jinja escapes
    # Plotly draws the payloads as text too: axis labels of the kernel chart and the
    # per-device timeline (host names), and a hover label.
    ticks = browser.evaluate("""Array.prototype.map.call(
      document.querySelectorAll("#fig-kernels .ytick text, #fig-timeline .ytick text"),
      function (t) { return t.textContent; }).join("\\n")""")
    assert "Cijk_<script>window.__xss=" in ticks and "k<b>bold</b> &amp; <a" in ticks
    assert F.short(XSS_HOSTS[1], F.HOST_CHARS) in ticks  # long host names are shortened
    hover = browser.evaluate("""(function () {  // one call: plotly throttles hover events
      var div = document.getElementById("fig-kernels");
      for (var c = 0; c < div.data.length; c++) {
        for (var p = 0; p < div.data[c].y.length; p++) {
          if (div.data[c].y[p].indexOf("href") >= 0) {
            Plotly.Fx.hover(div, [{curveNumber: c, pointNumber: p}]);
            var h = div.querySelector(".hovertext");
            return h ? h.textContent : "no hover label";
          }
        }
      }
      return "no such bar"; }())""")
    assert "<b>bold</b> &amp; <a href=\"javascript:" in hover, hover
    assert browser.evaluate("window.__xss === undefined && document.images.length === 0")


def test_history_page(browser: Browser, tmp_path: Path) -> None:
    """``history show --html`` in the browser (issue 29): six runs of one series, a planted
    GEMM slowdown in the last and a label that is a script: every trend chart renders, no
    console error, no request, the payload shown as text and never run."""
    from tests.conftest import cli
    from tests.test_history import write_run

    store = tmp_path / "runs.db"
    evil = "<img src=x onerror=window.__xss=1><script>window.__xss=2</script>"
    for i, scale in enumerate([1.0] * 5 + [1.5]):
        p = write_run(tmp_path / f"r{i}.xplane.pb", seed=i, gemm_scale=scale)
        label = evil if i == 5 else f"run-{i}"
        res = cli("history", "add", str(p), "--store", str(store), "--label", label,
                  "--tag", "model=toy", "--recorded-at", f"2026-01-01T00:00:0{i}Z")
        assert res.returncode == 0, res.stderr
    page = tmp_path / "h.html"
    res = cli("history", "show", "--store", str(store), "--html", str(page))
    assert res.returncode == 0, res.stderr
    state = load_page(browser, page.read_text(), tmp_path, "history")
    assert state["rendered"] and evil in state["text"]
    assert "compute:gemm" in state["text"]  # the regression's named cause


def test_memory_chart(browser: Browser, tmp_path: Path) -> None:
    """``report --memory`` on a real TPU v5e trace with allocator events: the memory chart
    draws in the browser (bytes in use over time, the peak marked) beside every other
    figure, and its peak is the one ``tracelens memory`` reports."""
    from tracelens.api.analysis import TraceAnalysis

    trace = ROOT / "sample_traces" / "tpu" / "memory" / "plain.xplane.pb.gz"
    out = tmp_path / "memory.html"
    TraceAnalysis(trace).report(out, memory=True)
    state = load_page(browser, out.read_text(encoding="utf-8"), tmp_path, "memory")
    assert "memory" in state["rendered"]
    peak = TraceAnalysis(trace).memory_report().devices[0].peak_bytes
    ys = browser.evaluate("""(function () {
      var div = document.getElementById("fig-memory");
      return div.data.map(function (t) { return t.y ? Array.prototype.slice.call(t.y) : []; });
    }())""")
    marks = [y[0] * float(1 << 30) for y in ys if len(y) == 1]  # the peak's marker, in GiB
    assert any(m == pytest.approx(peak, rel=1e-4) for m in marks), (marks, peak)
