"""The project's own modules (app/, serving/, bench/) import one another without a
circle, function-local imports included: read from their source, nothing imported."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.server_process import PROJECT_DIR

PACKAGES = ("app", "serving", "bench")


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


def test_the_walk_sees_function_local_imports() -> None:
    graph = import_graph()
    # create_served_app imports the app inside the function: the edge is there.
    assert "app.main" in graph["serving.served_app"]
    assert "serving.engines.uvicorn" in graph and "serving.launcher" in graph


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
