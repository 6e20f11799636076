"""docs/private-names.md and the rendered project's code agree, both ways.

Read from the template's sources, as text and AST: no project is rendered, nothing is
imported or served. The code's uses of a library's undocumented names that an AST can
see each need a row of the page's table, in the file and scope the row names:

- an attribute or an imported name with a leading underscore, on a third-party module,
  class or object, `super()` and `self` included when the class is a third-party
  class's subclass and does not define the name itself;
- an `import` or `from` of a third-party module whose path has a private part;
- an assignment to an attribute of a third-party module or class;
- a subclass of a third-party class, unless the class is in DOCUMENTED_BASES.

And each row names something its scope still uses: a row whose name has left the code
fails too, so the table shrinks with the code.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import TEMPLATE_ROOT

PAGE = TEMPLATE_ROOT / "docs" / "private-names.md"
PROJECT = TEMPLATE_ROOT / "template"
RUNTIME = ("app", "serving", "bench", "cli")
TESTS = ("tests",)
OWN = {"app", "serving", "bench", "cli", "tests"}
# Third-party classes whose subclassing their docs describe (a subclass of any other
# needs a row).
DOCUMENTED_BASES = {
    # aioquic: "asyncio API", quic_event_received() is for a subclass to reimplement
    "aioquic.asyncio.QuicConnectionProtocol",
    "fastapi.routing.APIRoute",  # FastAPI: "Custom Request and APIRoute class"
    "gunicorn.app.base.BaseApplication",  # gunicorn: "Custom Application"
    "pydantic.BaseModel",
    "pydantic_settings.BaseSettings",
    "sqlalchemy.orm.DeclarativeBase",  # SQLAlchemy 2: "Declarative Mapping", the base class
    "starlette.exceptions.HTTPException",  # Starlette: "Exceptions"
    "starlette.middleware.base.BaseHTTPMiddleware",  # Starlette: "Middleware"
}


@dataclass(frozen=True)
class Row:
    library: str
    name: str  # the name as the table gives it (dotted, quoted or called)
    # Where: each a file relative to the rendered project, and a dotted function or
    # class name in it ("" for the whole module).
    wheres: tuple[tuple[str, str], ...]

    @property
    def key(self) -> str:
        return key_of(self.name)


@dataclass(frozen=True)
class Use:
    path: str
    scope: str
    key: str
    what: str  # for the failure message

    def covered_by(self, row: Row) -> bool:
        return row.key == self.key and any(
            path == self.path and (not scope or self.scope == scope
                                   or self.scope.startswith(scope + "."))
            for path, scope in row.wheres)


def key_of(name: str) -> str:
    """The last part of a name: `a.B._c()` -> `_c`, `"console"` -> `console`."""
    name = name.removesuffix("()").strip('"\'')
    return name.rsplit(".", 1)[-1] if not name.startswith(("'", '"')) else name


def rows(table: str) -> list[Row]:
    """The rows of one of the page's tables: "runtime" or "tests"."""
    found: list[Row] = []
    section = ""
    for line in PAGE.read_text().splitlines():
        if line.startswith("## "):
            section = "tests" if "test" in line.lower() else "runtime"
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 6 or cells[0] in ("library", "") \
                or set(cells[0]) <= {"-", ":"} or section != table:
            continue
        name = re.search(r"`([^`]+)`", cells[1])
        wheres = tuple((path, scope or "") for path, scope
                       in re.findall(r"`([^`:]+\.py)(?::([^`]+))?`", cells[2]))
        assert name and wheres, f"a row without a `name` or a `where`: {line}"
        found.append(Row(cells[0], name.group(1), wheres))
    return found


def files(roots: tuple[str, ...]) -> Iterator[Path]:
    for root in roots:
        yield from sorted((PROJECT / root).rglob("*.py"))


def third_party(module: str) -> bool:
    top = module.split(".")[0]
    return bool(top) and top not in OWN and top not in sys.stdlib_module_names


def private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


class Uses(ast.NodeVisitor):
    """What one file uses of third-party names, as the module docstring lists."""

    def __init__(self, path: str, tree: ast.Module) -> None:
        self.path = path
        self.found: list[Use] = []
        self.scope: list[str] = []
        # For each class being visited: what it defines itself, if a third-party class
        # is among its bases (None otherwise).
        self.own: list[set[str] | None] = []
        self.bound: dict[str, str] = {}  # a local name -> the third-party dotted path
        for node in ast.walk(tree):  # function-local imports bind for the whole file
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if third_party(alias.name):
                        local = alias.asname or alias.name.split(".")[0]
                        self.bound[local] = alias.name if alias.asname else local
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                    and third_party(node.module):
                for alias in node.names:
                    self.bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        self.classes = {node.name: node for node in ast.walk(tree)
                        if isinstance(node, ast.ClassDef)}
        self.visit(tree)

    def note(self, key: str, what: str) -> None:
        self.found.append(Use(self.path, ".".join(self.scope), key, what))

    def dotted(self, node: ast.expr) -> str | None:
        """`gasgi.ASGIProtocol` -> gunicorn.workers.gasgi.ASGIProtocol, if third-party."""
        if isinstance(node, ast.Name):
            return self.bound.get(node.id)
        if isinstance(node, ast.Attribute) and (base := self.dotted(node.value)):
            return f"{base}.{node.attr}"
        return None

    def third_party_class(self, node: ast.ClassDef, seen: frozenset[str] = frozenset()) -> bool:
        for base in node.bases:
            if self.dotted(base):
                return True
            if (isinstance(base, ast.Name) and base.id in self.classes and base.id not in seen
                    and self.third_party_class(self.classes[base.id], seen | {node.name})):
                return True
        return False

    def own_names(self, node: ast.ClassDef) -> set[str]:
        """What a class (and its own bases in this file) defines: methods, class
        attributes and `self.x = ...`."""
        names: set[str] = set()
        for child in ast.walk(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) \
                    and not self.calls_super(child):
                names.add(child.name)
            elif isinstance(child, ast.Attribute) and isinstance(child.ctx, ast.Store) \
                    and isinstance(child.value, ast.Name) and child.value.id == "self":
                names.add(child.attr)
            elif isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                names.add(child.id)
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in self.classes and base.id != node.name:
                names |= self.own_names(self.classes[base.id])
        return names

    @staticmethod
    def calls_super(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """An override: it calls the same name on super()."""
        return any(isinstance(node, ast.Attribute) and node.attr == function.name
                   and isinstance(node.value, ast.Call)
                   and isinstance(node.value.func, ast.Name) and node.value.func.id == "super"
                   for node in ast.walk(function))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if third_party(alias.name) and any(map(private, alias.name.split("."))):
                self.note(next(filter(private, alias.name.split("."))), f"import {alias.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module or not third_party(node.module):
            return
        for part in node.module.split("."):
            if private(part):
                self.note(part, f"from {node.module} import ...")
        for alias in node.names:
            if private(alias.name):
                self.note(alias.name, f"from {node.module} import {alias.name}")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        for base in node.bases:
            if (path := self.dotted(base)) and path not in DOCUMENTED_BASES:
                self.note(path.rsplit(".", 1)[-1], f"class {node.name}({path})")
        self.own.append(self.own_names(node) if self.third_party_class(node) else None)
        self.generic_visit(node)
        self.own.pop()
        self.scope.pop()

    @staticmethod
    def on_self_or_super(node: ast.expr) -> bool:
        return (isinstance(node, ast.Name) and node.id in ("self", "cls")) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "super")

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Attribute(self, node: ast.Attribute) -> None:
        own = self.own[-1] if self.own else None
        if private(node.attr) and (path := self.dotted(node.value)):
            self.note(node.attr, f"{path}.{node.attr}")
        elif (own is not None and private(node.attr) and node.attr not in own
              and self.on_self_or_super(node.value)):
            self.note(node.attr, f"{node.attr}, of a third-party base class")
        elif isinstance(node.ctx, ast.Store) and (path := self.dotted(node.value)):
            self.note(node.attr, f"{path}.{node.attr} = ...")
        self.generic_visit(node)


def uses(roots: tuple[str, ...]) -> list[Use]:
    found: list[Use] = []
    for file in files(roots):
        path = file.relative_to(PROJECT).as_posix()
        found += Uses(path, ast.parse(file.read_text(), filename=str(file))).found
    return found


def scope_source(path: str, scope: str) -> str:
    """The source of the function or class named (the module's for none)."""
    file = PROJECT / path
    assert file.is_file(), f"{path} does not exist"
    text = file.read_text()
    node: ast.AST | None = ast.parse(text)
    for part in scope.split(".") if scope else ():
        node = next((child for child in ast.walk(node)  # type: ignore[arg-type]
                     if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                     and child.name == part), None)
        assert node is not None, f"no {scope} in {path}"
    return (ast.get_source_segment(text, node) or "") if scope else text  # type: ignore[arg-type]


def mentions(source: str, key: str) -> bool:
    if re.fullmatch(r"\w+", key):
        return re.search(rf"(?<![\w]){re.escape(key)}(?![\w])", source) is not None
    return key in source


def uncovered(table: str, roots: tuple[str, ...]) -> list[str]:
    table_rows = rows(table)
    return [f"{use.path}:{use.scope}: {use.what}" for use in uses(roots)
            if not any(use.covered_by(row) for row in table_rows)]


def stale(table: str, roots: tuple[str, ...]) -> list[str]:
    return [f"{row.name} ({path}:{scope})" for row in rows(table) for path, scope in row.wheres
            if path.split("/")[0] not in roots or not mentions(scope_source(path, scope), row.key)]


def test_every_private_name_the_code_uses_has_a_row() -> None:
    found = uncovered("runtime", RUNTIME)
    assert not found, "add a row to docs/private-names.md for:\n" + "\n".join(found)


def test_every_private_name_the_tests_use_has_a_row() -> None:
    found = uncovered("tests", TESTS)
    assert not found, "add a row to docs/private-names.md (tests) for:\n" + "\n".join(found)


def test_every_row_names_what_its_scope_still_uses() -> None:
    assert rows("runtime") and rows("tests")
    found = stale("runtime", RUNTIME) + stale("tests", TESTS)
    assert not found, "remove or move these rows of docs/private-names.md:\n" + "\n".join(found)


def test_the_detector_sees_each_kind_of_use(tmp_path: Path) -> None:
    """Each kind the module docstring lists, in a made-up module."""
    code = '''
import uvicorn._types
from gunicorn.workers import gasgi
from granian._internal import thing
from prometheus_client import values

class Mine(gasgi.ASGIWorker):
    def mine(self):
        self._mine = 1
        return self._theirs, self._mine, super()._also_theirs()

def f():
    gasgi.ASGIProtocol = Mine
    values._private_value
'''
    found = {(use.scope, use.key) for use in Uses("x.py", ast.parse(code)).found}
    assert found == {("", "_types"), ("", "_internal"), ("Mine", "ASGIWorker"),
                     ("Mine.mine", "_theirs"), ("Mine.mine", "_also_theirs"),
                     ("f", "ASGIProtocol"), ("f", "_private_value")}


def requirements() -> dict[str, str]:
    """The rendered project's dependencies, by name: the whole requirement."""
    text = (PROJECT / "pyproject.toml.jinja").read_text()
    block = text[text.index("dependencies = ["):text.index("]\n", text.index("dependencies = ["))]
    return {match.group(1).lower(): match.group(0).strip('"')
            for match in re.finditer(r'"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?[^"]*"', block)}


def test_each_library_with_private_names_is_bounded_above() -> None:
    """Bounded to the versions tested: a release past them waits for the suite."""
    required = requirements()
    libraries = {row.library for row in rows("runtime")}
    assert libraries <= set(required), "a row's library is not a dependency"
    unbounded = [required[name] for name in sorted(libraries) if "<" not in required[name]]
    assert not unbounded, f"give these an upper bound, the versions tested: {unbounded}"


def test_ci_runs_the_slow_tests_on_dependabots_pull_requests() -> None:
    """The tests that guard the names are slow ones: CI runs the whole suite (what
    `make test-all` runs) on Dependabot's uv.lock bumps, what `make test` runs on the
    others."""
    import yaml

    ci = yaml.safe_load((PROJECT / ".github/workflows/ci.yml").read_text())
    triggers = ci.get("on", ci.get(True))
    assert "pull_request" in triggers
    steps = {step.get("run", ""): step.get("if", "")
             for job in ci["jobs"].values() for step in job["steps"]}
    assert steps['uv run --locked pytest -m "slow or long or bench"'] == (
        "github.event.pull_request.user.login == 'dependabot[bot]'")
    assert steps["uv run --locked pytest"] == ""
    dependabot = yaml.safe_load((PROJECT / ".github/dependabot.yml").read_text())
    (uv,) = [entry for entry in dependabot["updates"] if entry["package-ecosystem"] == "uv"]
    # Past a bound only with a template release or by hand: docs/private-names.md.
    assert uv["versioning-strategy"] == "lockfile-only"
