"""The apps depend on each other one way (docs/architecture.md):

    reviews → memory → skills_registry → dreamweb        (and demo → every app; no app → demo)

Every import statement counts, at module level or inside a function: an import written at call time is still a
dependency, it only hides from a reader. Within the project, modules import each other without cycles (a package
importing its own submodules to re-export them is not a cycle), so the order a change runs in can be read from the
imports alone.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Each app may import itself and the apps after it in this list, never the ones before it.
LAYERS = ["reviews", "memory", "skills_registry", "dreamweb"]
# Wiring that may import every app, and that no app imports.
WIRING = ["demo"]
APPS = LAYERS + WIRING
# The one cycle Django's shape needs: dreamweb's models are built on TeamQuerySet, whose for_user() asks Membership.
ALLOWED_CYCLES = [{"dreamweb.models", "dreamweb.tenancy"}]


def allowed(app: str) -> set[str]:
    if app in WIRING:
        return set(APPS)
    return set(LAYERS[LAYERS.index(app) :])


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(module: str, source: str, *, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the source, however deeply nested, relative ones resolved;
    for ``from a import b`` both ``a`` and ``a.b`` (b may be a module)."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if base else anchor
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if alias.name != "*"]
    return found


def project_files() -> dict[str, Path]:
    return {module_name(path): path for app in APPS for path in sorted((ROOT / app).rglob("*.py"))}


def back_imports(module: str, source: str, *, is_package: bool = False) -> list[str]:
    app = module.split(".")[0]
    return [
        f"{module}:{line} imports {name}"
        for line, name in imported_modules(module, source, is_package=is_package)
        if name.split(".")[0] in APPS and name.split(".")[0] not in allowed(app)
    ]


def test_no_app_imports_an_app_above_it():
    found = []
    for module, path in project_files().items():
        found += back_imports(module, path.read_text(), is_package=path.name == "__init__.py")
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "from reviews.models import Proposal\n",
        "import reviews.dreams\n",
        "def later():\n    from reviews import dreams\n    return dreams\n",
        "class Lazy:\n    def run(self):\n        if True:\n            import reviews.tasks as t\n",
        "from demo.data import generate_sessions\n",
    ],
)
def test_a_back_import_is_found_wherever_it_is_written(source):
    assert back_imports("memory.context", source) != []


def test_relative_imports_resolve_inside_their_package():
    assert imported_modules("reviews.dreams.steps", "from ..models import DreamRun\nfrom .queue import enqueue\n") == [
        (1, "reviews.models"),
        (1, "reviews.models.DreamRun"),
        (2, "reviews.dreams.queue"),
        (2, "reviews.dreams.queue.enqueue"),
    ]
    assert imported_modules("reviews.dreams", "from .runs import start_run\n", is_package=True)[0] == (
        1,
        "reviews.dreams.runs",
    )


def import_graph() -> dict[str, set[str]]:
    files = project_files()
    graph: dict[str, set[str]] = {}
    for module, path in files.items():
        deps = set()
        for _, name in imported_modules(module, path.read_text(), is_package=path.name == "__init__.py"):
            parts = name.split(".")
            # Importing a.b.c runs a and a.b first; a module's own packages are already being imported.
            for i in range(1, len(parts) + 1):
                target = ".".join(parts[:i])
                if target in files and target != module and not module.startswith(target + "."):
                    deps.add(target)
        graph[module] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_modules_import_each_other_without_cycles():
    assert [c for c in cycles(import_graph()) if c not in ALLOWED_CYCLES] == []


def test_a_cycle_through_a_call_time_import_is_found():
    graph = {"reviews.tasks": {"reviews.dreams.steps"}, "reviews.dreams.steps": {"reviews.tasks"}, "x": set()}
    assert cycles(graph) == [{"reviews.tasks", "reviews.dreams.steps"}]
