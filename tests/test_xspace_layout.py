"""Issue 14: ``parsers/xspace/`` has no import cycle, no private import across its modules,
and imports from the core only the model/errors/hardware layer (never the dev package)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "parsers" / "xspace"
CORE_ALLOWED = {"tracelens.core.model", "tracelens.core.errors", "tracelens.core.hardware"}


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
    return out


def test_no_private_imports_and_only_the_core_model_layer() -> None:
    for path in sorted(PKG.glob("*.py")):
        for module, names in _imports(path):
            if module.startswith("parsers."):
                assert not [n for n in names if n.startswith("_")], (path.name, module, names)
            if module.startswith("tracelens"):
                assert module in CORE_ALLOWED or (module == "tracelens" and names == [
                    "hardware"]), (path.name, module)
            assert not module.startswith("reports"), (path.name, module)


def test_no_import_cycle_in_the_package() -> None:
    graph = {p.stem: {m.rsplit(".", 1)[1] for m, _ in _imports(p)
                      if m.startswith("parsers.xspace.")}
             | {n for m, names in _imports(p) if m == "parsers.xspace" for n in names}
             for p in PKG.glob("*.py") if p.stem != "__init__"}
    graph = {k: {v for v in vs if v in graph} for k, vs in graph.items()}
    done: set[str] = set()

    def visit(node: str, stack: tuple[str, ...]) -> None:
        assert node not in stack, f"import cycle: {' -> '.join(stack + (node,))}"
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, stack + (node,))
        done.add(node)

    for node in sorted(graph):
        visit(node, ())
