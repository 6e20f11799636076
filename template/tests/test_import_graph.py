"""The project's own modules import only modules of their layer or the layers below it
(app/core/layers.py), and one another without a circle, function-local imports
included: read from their source, nothing of the project imported to find them."""

from __future__ import annotations

import ast
from pathlib import Path

from app.core.layers import LAYERS, layer_of
from app.core.loops import ENGINES
from tests.server_process import PROJECT_DIR

PACKAGES = tuple(dict.fromkeys(package.partition(".")[0]
                               for _, packages in LAYERS for package in packages))
RANK = {name: place for place, (name, _) in enumerate(LAYERS)}


def module_files(root: Path = PROJECT_DIR) -> dict[str, Path]:
    """Every module of the packages, by its dotted name (a package by its own)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, modules: set[str]) -> set[str]:
    """The project's modules that `name` imports anywhere in its source: at its top,
    inside a function, under `if TYPE_CHECKING:`. `from pkg import x` is module
    `pkg.x` when there is one, else `pkg` itself."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in modules else base)
    return {target for target in targets if target in modules and target != name}


def import_graph(root: Path = PROJECT_DIR) -> dict[str, set[str]]:
    files = module_files(root)
    return {name: imported(name, path, set(files)) for name, path in files.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each circle found by a depth-first walk, as the modules along it."""
    found, done, path = [], set(), []

    def walk(name: str) -> None:
        if name in path:
            found.append([*path[path.index(name):], name])
            return
        if name in done:
            return
        path.append(name)
        for target in sorted(graph[name]):
            walk(target)
        path.pop()
        done.add(name)

    for name in sorted(graph):
        walk(name)
    return found


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a module in a higher layer than the importer's."""
    return sorted(f"{name} ({layer_of(name)}) -> {target} ({layer_of(target)})"
                  for name, targets in graph.items() for target in targets
                  if RANK[layer_of(target)] > RANK[layer_of(name)])  # type: ignore[index]


def test_the_walk_sees_function_local_imports() -> None:
    graph = import_graph()
    # The launcher imports the engines' package inside `serve`: the edge is there.
    assert "serving.engines" in graph["serving.launcher"]
    assert "serving.engines.uvicorn" in graph and "cli.main" in graph


def test_every_module_is_in_a_layer() -> None:
    assert [name for name in import_graph() if layer_of(name) is None] == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    found = upward(import_graph())
    assert not found, "imports that run up the layers:\n" + "\n".join(found)


def test_an_upward_import_is_found_when_there_is_one(tmp_path: Path) -> None:
    for package in ("app/core", "app/middleware", *PACKAGES[1:]):
        (tmp_path / package).mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "app" / "core" / "low.py").write_text("def f():\n    from serving import high\n")
    (tmp_path / "serving" / "high.py").write_text("from app.core import low\n")
    assert upward(import_graph(tmp_path)) == ["app.core.low (base) -> serving.high (serving)"]


def test_serving_imports_nothing_of_the_app_above_the_base() -> None:
    """It loads the app by name (app/core/layers.py APP_FACTORY)."""
    found = sorted(f"{name} -> {target}" for name, targets in import_graph().items()
                   if layer_of(name) == "serving" for target in targets
                   if layer_of(target) not in ("base", "serving"))
    assert not found


def test_an_engines_library_is_imported_only_in_its_engines_module() -> None:
    found = []
    for name, path in module_files().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{name} imports {library}" for library in names
                      if (engine := library.partition(".")[0]) in ENGINES
                      and not name.startswith(f"serving.engines.{engine}")]
    assert not found


def test_a_circle_is_found_when_there_is_one(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    (tmp_path / "app" / "one.py").write_text("from app.two import X\n")
    (tmp_path / "app" / "two.py").write_text("def f():\n    from app import one\n")
    for package in PACKAGES[1:]:
        (tmp_path / package).mkdir()
    assert circles(import_graph(tmp_path)) == [["app.one", "app.two", "app.one"]]


def test_no_module_imports_itself_through_others() -> None:
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)
