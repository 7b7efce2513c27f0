"""The house's layout, held by a test (issue 51): the code's own imports, read from its source.

- No module imports one that imports it back, however far round (a function's import counts too).
- The packages depend one way: core on none of the others; worker and dashboard on core; api on core
  and dashboard (it mounts the pages); cli on any.
- core/ and worker/ are laid out by stage, and a stage imports only the stages before it, as
  docs/ARCHITECTURE.md draws them. A new arrow between stages fails here: add it to STAGES below
  only where it runs with the flow.
"""

import ast
from collections import defaultdict
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("api", "core", "worker", "dashboard", "cli")
MAY_IMPORT = {"core": set(), "worker": {"core"}, "dashboard": {"core"}, "api": {"core", "dashboard"},
              "cli": {"core", "worker", "api", "dashboard"}}
# Each room (a folder of the package, or a module at its top) and the rooms of the same package it may import.
STAGES = {
    "core": {
        "core.description": set(),
        "core.settings": {"core.description"},
        "core.records": {"core.description", "core.settings"},
        "core.jobs": {"core.records", "core.settings"},
        "core.results": {"core.description", "core.records", "core.wire_types"},
        "core.verdicts": {"core.description", "core.errors", "core.jobs", "core.records", "core.results",
                          "core.wire_types"},
        "core.exchange": {"core.description", "core.records", "core.results", "core.verdicts"},
        "core.profile": set(),
        "core.web_deps": {"core.records", "core.settings"},
    },
    "worker": {
        "worker.arguments": set(),
        "worker.compile": {"worker.arguments", "worker.launch"},  # the compile process confines itself with the jail's Landlock layer
        "worker.gpu": {"worker.arguments", "worker.compile"},
        "worker.launch": set(),
        "worker.measure": {"worker.arguments", "worker.compile", "worker.gpu", "worker.launch"},
        "worker.profile": {"worker.child", "worker.compile", "worker.measure"},
        "worker.child": {"worker.compile", "worker.measure"},
        "worker.gpu_process": {"worker", "worker.child", "worker.measure", "worker.process_tree"},
        "worker.execute": {"worker", "worker.fleet", "worker.gpu_process", "worker.job_end", "worker.measure",
                           "worker.profile", "worker.webhook"},
        "worker.fleet": {"worker.child"},
        "worker.celery_app": {"worker", "worker.compile", "worker.fleet", "worker.gpu_process", "worker.measure",
                              "worker.reaper"},
        "worker.tasks": {"worker.celery_app", "worker.execute"},
    },
}


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def product_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def imports_of(path: Path, known: dict[str, Path]) -> set[str]:
    """The product modules a file imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name in known}


def graph() -> dict[str, set[str]]:
    known = product_modules()
    return {name: imports_of(path, known) - {name} for name, path in known.items()}


def room(module: str) -> str:
    """A module's room: its package's subfolder (core.verdicts), else itself (worker.execute)."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (ROOT / parts[0] / parts[1]).is_dir()):
        return ".".join(parts[:2])
    return module


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_no_module_imports_one_that_imports_it_back():
    edges = graph()
    assert len(edges) > 150  # the product's modules were found (190 at issue 52)
    assert cycles(edges) == []


def test_a_circle_is_found_where_there_is_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_packages_depend_one_way():
    wrong = sorted(f"{m} imports {t}" for m, targets in graph().items() for t in targets
                   if t.split(".")[0] != m.split(".")[0] and t.split(".")[0] not in MAY_IMPORT[m.split(".")[0]])
    assert wrong == []


def test_core_and_worker_stages_import_only_the_stages_before_them():
    arrows: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph().items():
        for target in targets:
            if room(module) != room(target) and module.split(".")[0] == target.split(".")[0]:
                arrows[room(module)].add(room(target))
    for package, stages in STAGES.items():
        for source in sorted(r for r in arrows if r.startswith(package + ".") or r == package):
            unexpected = arrows[source] - stages.get(source, set())
            assert not unexpected, f"{source} imports {sorted(unexpected)}: not a stage before it (tests/test_layers.py STAGES)"
    # The stage map itself runs one way: no stage may be allowed, through others, back to itself.
    for package, stages in STAGES.items():
        assert cycles({source: set(targets) for source, targets in stages.items()}) == [], package


def test_a_migration_imports_nothing_of_the_product():
    """A migration replays the same forever (issue 51): it reads the database and its own files, never
    today's models, whose change would change what an old database is upgraded to."""
    for path in sorted((ROOT / "migrations" / "versions").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert name.split(".")[0] not in PACKAGES, f"{path.name} imports {name}"
