"""The import graph (issue 14): no cycle anywhere, data flows parsers -> core -> reports, and
the development package (``tracelens_dev``: synthetic traces, writers) sits on top: it may use
any runtime module, no runtime module may use it, and the wheel leaves it out.

Every ``import`` counts, module-level or inside a function: a lazy import still ties the two
modules together. ``from a import b`` counts as importing ``a.b`` when that is a module.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from setuptools import find_namespace_packages

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ("tracelens", "parsers", "reports")
DEV = "tracelens_dev"
PACKAGES = RUNTIME + (DEV,)

# What a parser may use of the core (issue 26): the data model and the errors. Parsers report
# facts (device names and properties, recorded shapes, counter values); identifying devices
# and costing kernels are load stages of the core (tracelens.loading.devices,
# tracelens.cost.counters,
# tracelens.cost.shapes: tracelens.loading.reading.file_stages). The data model of XLA programs
# (tracelens.core.hlo_model) is what the HLO decoders (parsers.hlo) produce and the cost model
# reads.
PARSER_CORE = {"tracelens.core.model", "tracelens.core.hlo_model", "tracelens.core.errors"}


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


def _package(module: str) -> str:
    return module.split(".")[0]


def test_the_graph_sees_every_package() -> None:
    assert {_package(m) for m in GRAPH} == set(PACKAGES)
    assert "tracelens_dev.synth" in GRAPH and "tracelens_dev.writers.xspace" in GRAPH


def _dev_references(path: Path) -> list[str]:
    """Every import of the dev package in a file, and every string naming it passed to a call
    (``importlib.import_module("tracelens_dev...")``): docstrings may mention it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
        elif isinstance(node, ast.Call):
            found.extend(a.value for a in node.args
                         if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return [f for f in found if _package(f) == DEV]


def test_the_runtime_never_uses_the_dev_package() -> None:
    bad = [(m, ref) for m, path in sorted(MODULES.items()) if _package(m) in RUNTIME
           for ref in _dev_references(path)]
    assert bad == []


def test_the_wheel_ships_the_runtime_packages_and_not_the_dev_package() -> None:
    """The packages ``pip install .`` installs, as setuptools discovers them from
    pyproject.toml (namespace discovery is its default there)."""
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"]["find"]
    assert find.get("namespaces", True)
    shipped = set(find_namespace_packages(str(ROOT), include=find.get("include", ["*"]),
                                          exclude=find.get("exclude", [])))
    runtime = {m for m, p in MODULES.items() if _package(m) in RUNTIME and p.name == "__init__.py"}
    assert runtime <= shipped
    assert {p for p in shipped if _package(p) == DEV} == set()


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


def test_parsers_use_only_the_model_and_errors_of_the_core_and_no_renderer() -> None:
    assert GRAPH["tracelens.core.hlo_model"] == set()  # the HLO model is a leaf: no way on from it
    assert GRAPH["parsers.hlo.proto"] >= {"tracelens.core.hlo_model"}  # the graph sees the decoders
    bad = [(m, d) for m, deps in GRAPH.items() if m.startswith("parsers")
           for d in deps if _package(d) in ("tracelens", DEV) and d not in PARSER_CORE]
    bad += [(m, d) for m, deps in GRAPH.items() if m.startswith("parsers")
            for d in deps if d.startswith("reports")]
    assert bad == []


# the modules that read traces: the loader in parts (formats holds the readers) and the CLI
READING = ("tracelens.loading.loader", "tracelens.loading.formats", "tracelens.loading.reading",
           "tracelens.loading.combine",
           "tracelens.engine.hosts", "tracelens.engine.cluster", "tracelens.cli.commands")


def test_reports_never_read_traces() -> None:
    bad = [(m, d) for m, deps in GRAPH.items() if m.startswith("reports") for d in deps
           if d.startswith("parsers") or d in READING]
    assert bad == []


CLI = ("tracelens.cli.commands", "tracelens.cli.history")  # the command modules
# The Python facade is the other front door (issue 47): each command is options -> one facade
# call -> render, and the facade writes what a command writes (the report, the tables).
FACADE = ("tracelens.api.analysis",)


def test_the_core_reaches_parsers_only_through_the_reader_registry_and_renderers_only_from_the_cli(
        ) -> None:
    core = [m for m in GRAPH if _package(m) == "tracelens"]
    to_reports = [(m, d) for m in core for d in GRAPH[m]
                  if d.startswith("reports") and m not in CLI + FACADE
                  and not m.startswith("tracelens.cli.")]  # the CLI's command modules
    to_parsers = [(m, d) for m in core for d in GRAPH[m] if d.startswith("parsers")
                  and m != "tracelens.loading.formats"]  # the readers' registry
    assert to_reports == [] and to_parsers == []


def test_every_test_module_has_a_registered_layer() -> None:
    """``pytest -m parsers`` (core, engine, reports, cli) runs one layer: each test module
    maps to a layer registered in pyproject.toml (tests/conftest.py, LAYERS)."""
    import tomllib

    from tests.conftest import layer_of

    root = Path(__file__).resolve().parent
    markers = {m.split(":")[0] for m in tomllib.loads(
        (root.parent / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]}
    layers = {p.stem: layer_of(p.stem) for p in root.glob("test_*.py")}
    assert set(layers.values()) <= markers and "slow" in markers
    assert layers["test_xspace_decode"] == "parsers" and layers["test_engine"] == "engine"
    assert layers["test_golden"] == "cli" and layers["test_report"] == "reports"
    assert layers["test_classify"] == "core"
def test_one_protobuf_descriptor_builder() -> None:
    """The XSpace and HloProto schemas are built by one builder (issue 26): no other module
    makes descriptors, pools or message classes of its own."""
    builders = ("FileDescriptorProto(", "DescriptorPool(", "GetMessageClass(",
                "message_type.add(")
    found = sorted(m for m, path in MODULES.items()
                   if any(b in path.read_text() for b in builders))
    assert found == ["parsers.protoschema"]
    assert {"parsers.xplane_schema", "parsers.hlo.schema"} <= {
        m for m, deps in GRAPH.items() if "parsers.protoschema" in deps}


def test_the_model_carries_no_format_or_writer_field() -> None:
    """Issue 26: what one format says (processes on a host clock, decoders, Kineto's facts),
    what a reader hands a load stage (counters, shapes) and what the writers need travel as
    the readers' typed facts (``TraceMeta.format_facts``) or the writers' hints, not as fields
    of the model."""
    from dataclasses import fields

    from tracelens.core.model import HostInfo, TraceMeta

    assert [f.name for f in fields(TraceMeta)] == [
        "sources", "notices", "alignment", "steps_source", "hosts", "ranks", "format_facts",
        "op_costs", "clips", "unaligned", "member"]
    assert [f.name for f in fields(HostInfo)] == [
        "path", "named", "profile_start_ns", "ranks", "paths", "pid"]


def test_dask_is_imported_in_one_runtime_module() -> None:
    """``distributed`` (Dask) stays inside the engine: one module imports it, and the
    analyses reach their workers through that module's functions."""
    users = set()
    for m, path in MODULES.items():
        if _package(m) not in RUNTIME:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if any(n == "distributed" or n.startswith("distributed.") for n in names):
                users.add(m)
    assert users == {"tracelens.engine.cluster"}


def test_the_engine_finds_no_capability_by_name() -> None:
    """An analysis's optional capabilities (pack, keep and drop, whole_job) are protocols
    the engine asks for with isinstance (tracelens.engine.protocol), never getattr."""
    found = []
    for m, path in MODULES.items():
        if not m.startswith("tracelens.engine"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" \
                    and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                found.append((m, node.args[1].value))
    assert [f for f in found if f[1] in ("pack", "keep", "drop", "whole_job")] == []
