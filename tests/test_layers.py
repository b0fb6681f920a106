"""The import graph (issue 14): no cycle anywhere, and data flows parsers -> core -> reports.

Every ``import`` counts, module-level or inside a function: a lazy import still ties the two
modules together. ``from a import b`` counts as importing ``a.b`` when that is a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tracelens", "parsers", "reports")

# The bottom layer every package may use: the data model and its leaf helpers (no imports of
# other tracelens modules): errors, the hardware table, the protobuf wire encoder, the
# version, and two leaf formula modules readers apply while reading (costs from recorded
# shapes, costs from hardware counters).
BOTTOM = {"tracelens", "tracelens.model", "tracelens.errors", "tracelens.hardware",
          "tracelens.wire", "tracelens.version", "tracelens.shapecost", "tracelens.counters"}
# Writers of synthetic traces are development tooling, not readers: they may classify.
WRITERS = {"parsers.xprof_write", "parsers.kineto.writer", "parsers.rocprof.export",
           "parsers.rocprof.csv_write", "parsers.rocprof.json_write",
           "parsers.rocprof.rocpd_write"}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


MODULES = _modules()


def _imports(name: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(MODULES[name].read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {m: _imports(m) for m in MODULES}


def test_no_import_cycle() -> None:
    done: set[str] = set()

    def visit(node: str, stack: tuple[str, ...]) -> None:
        assert node not in stack, "import cycle: " + " -> ".join(stack + (node,))
        if node in done:
            return
        for nxt in sorted(GRAPH[node]):
            visit(nxt, stack + (node,))
        done.add(node)

    for node in sorted(GRAPH):
        visit(node, ())


def test_parsers_use_only_the_bottom_layer_and_no_renderer() -> None:
    bad = [(m, d) for m, deps in GRAPH.items() if m.startswith("parsers") and m not in WRITERS
           for d in deps if d.startswith("tracelens") and d not in BOTTOM]
    bad += [(m, d) for m, deps in GRAPH.items() if m.startswith("parsers")
            for d in deps if d.startswith("reports")]
    assert bad == []


# the modules that read traces: the loader in parts (formats holds the readers) and the CLI
READING = ("tracelens.loader", "tracelens.formats", "tracelens.reading", "tracelens.combine",
           "tracelens.engine", "tracelens.cli")


def test_reports_never_read_traces() -> None:
    bad = [(m, d) for m, deps in GRAPH.items() if m.startswith("reports") for d in deps
           if d.startswith("parsers") or d in READING]
    assert bad == []


def test_the_core_reaches_parsers_only_through_the_loader_and_renderers_only_from_the_cli(
        ) -> None:
    core = [m for m in GRAPH if m.startswith("tracelens")]
    to_reports = [(m, d) for m in core for d in GRAPH[m]
                  if d.startswith("reports") and m != "tracelens.cli"]
    to_parsers = [(m, d) for m in core for d in GRAPH[m] if d.startswith("parsers")
                  and m not in ("tracelens.formats", "tracelens.cli")  # the readers' registry
                  and not m.startswith("tracelens.synth")]
    assert to_reports == [] and to_parsers == []
