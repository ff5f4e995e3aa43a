"""The package's import structure, read from the source (`ast`): the sans-IO core imports none of
the rules, adapters, outputs, recording, replay or probe (not even through another module), and
nothing of the package but itself, `config` and `errors`; and no module imports itself back
through others (no cycle).

Every import statement counts, those inside functions too (they only delay a cycle), except those
under `if TYPE_CHECKING:`, which never run. `from package import name` is an import of the
submodule `package.name` when there is one, else of the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mrtr_inspect

PACKAGE = Path(mrtr_inspect.__file__).resolve().parent
CORE = "mrtr_inspect.core"
NOT_FOR_THE_CORE = ("mrtr_inspect.rules", "mrtr_inspect.adapters", "mrtr_inspect.outputs", "mrtr_inspect.recording",
                    "mrtr_inspect.replay", "mrtr_inspect.probe")
FOR_THE_CORE = (CORE, "mrtr_inspect.config", "mrtr_inspect.errors")  # all the core may import of the package

# Cycles known and being removed elsewhere; each names who removes it.
KNOWN_CYCLES: list[set[str]] = []


def _modules() -> dict[str, tuple[Path, bool]]:
    """module name -> (file, is a package)"""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the import nodes under `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                skip |= {id(n) for b in node.body for n in ast.walk(b) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return skip


def _targets(module: str, is_pkg: bool, node: ast.Import | ast.ImportFrom, modules: dict) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "mrtr_inspect"]
    if node.level:
        base = module.split(".") if is_pkg else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
        if target.split(".")[0] != "mrtr_inspect":
            return []
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target for a in node.names]


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip = _type_checking_only(tree)
        graph[name] = {t for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                       and id(node) not in skip for t in _targets(name, is_pkg, node, modules) if t in modules}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (or one that imports itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                found.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_reads_imports_inside_functions_and_leaves_type_checking_ones_out():
    g = import_graph()
    assert "mrtr_inspect.rules.registry" in g["mrtr_inspect.analysis"]  # a module-level import
    assert "mrtr_inspect.adapters.stdio_tee" in g["mrtr_inspect.cli"]  # imported inside a command's function
    assert "mrtr_inspect.core.chains" not in g["mrtr_inspect.core.observations"]  # under TYPE_CHECKING only
    assert "mrtr_inspect.core.rawjson" in g["mrtr_inspect.core.messages"]  # `from . import rawjson`
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def reached(graph: dict[str, set[str]], module: str) -> set[str]:
    """The modules `module` imports, directly or through others."""
    reach, todo = set(), [module]
    while todo:
        for t in graph[todo.pop()] - reach:
            reach.add(t)
            todo.append(t)
    return reach


def _inside(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def core_violations(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """core module -> what it reaches that it must not: a module of NOT_FOR_THE_CORE, or any module
    of the package outside FOR_THE_CORE."""
    out = {}
    for m in graph:
        if _inside(m, (CORE,)):
            bad = sorted(t for t in reached(graph, m) if _inside(t, NOT_FOR_THE_CORE) or not _inside(t, FOR_THE_CORE))
            if bad:
                out[m] = bad
    return out


def test_a_core_module_reaching_recording_replay_or_probe_through_another_is_a_violation():
    g = {"mrtr_inspect.core.a": {"mrtr_inspect.core.b"}, "mrtr_inspect.core.b": {"mrtr_inspect.errors"},
         "mrtr_inspect.errors": set(), "mrtr_inspect.config": set()}
    assert core_violations(g) == {}
    for outside in ("mrtr_inspect.recording.writer", "mrtr_inspect.replay.server", "mrtr_inspect.probe.runner",
                    "mrtr_inspect.version"):
        bad = {**g, "mrtr_inspect.errors": {outside}, outside: set()}
        assert core_violations(bad) == {"mrtr_inspect.core.a": [outside], "mrtr_inspect.core.b": [outside]}, outside


def test_the_core_imports_nothing_but_itself_config_and_errors_even_through_another_module():
    g = import_graph()
    assert len([m for m in g if _inside(m, (CORE,))]) > 5
    assert core_violations(g) == {}


def test_no_import_cycle():
    found = [c for c in cycles(import_graph()) if c not in KNOWN_CYCLES]
    assert found == [], f"import cycles: {[sorted(c) for c in found]}"
