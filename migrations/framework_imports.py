"""Copier migration, on every update: move the user's imports to the project's framework.

A project switched between FastAPI and notslowapi (`--data framework=...`) must not keep
imports of the other one: two Starlettes mix silently. Before the update (`check`), every
import to move is found and one that cannot be rewritten safely (`import fastapi`, used
as `fastapi.X`) stops the update with a sentence before anything is written. After it
(`apply`), each `from fastapi...` / `from starlette...` line is rewritten, the files
changed are listed, and an import left to change by hand fails the update.

Usage: framework_imports.py check|apply FRAMEWORK   (in the project, as Copier runs it)
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

# For each framework, the packages of the other one and what replaces them.
MOVES = {
    "notslowapi": {"fastapi": "notslowapi", "starlette": "notslowapi.starlette"},
    "fastapi": {"notslowapi.starlette": "starlette", "notslowapi": "fastapi"},
}
FOLDERS = ("app", "tests")


def moved(module: str, moves: dict[str, str]) -> str | None:
    for package, instead in moves.items():  # the longer package first (notslowapi.starlette)
        if module == package or module.startswith(f"{package}."):
            return instead + module[len(package):]
    return None


def imports(tree: ast.AST, moves: dict[str, str]) -> tuple[list[ast.ImportFrom], list[ast.Import]]:
    """The `from` imports to rewrite, and the plain `import` ones that cannot be."""
    rewritable, plain = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if moved(node.module, moves):
                rewritable.append(node)
        elif isinstance(node, ast.Import) and any(moved(a.name, moves) for a in node.names):
            plain.append(node)
    return rewritable, plain


def sources(root: Path) -> list[Path]:
    return sorted(p for folder in FOLDERS if (root / folder).is_dir()
                  for p in (root / folder).rglob("*.py"))


def check(root: Path, moves: dict[str, str]) -> list[str]:
    refusals = []
    for path in sources(root):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in imports(tree, moves)[1]:
            names = ", ".join(a.name for a in node.names)
            refusals.append(f"{path.relative_to(root)} line {node.lineno} imports {names} as a "
                            "module, which this update cannot rewrite: change it to a `from` "
                            "import, commit, and run the update again")
    return refusals


def apply(root: Path, moves: dict[str, str]) -> list[str]:
    changed = []
    for path in sources(root):
        text = path.read_text(encoding="utf-8")
        try:
            rewritable = imports(ast.parse(text), moves)[0]
        except SyntaxError:
            continue
        if not rewritable:
            continue
        lines = text.splitlines(keepends=True)
        for node in rewritable:
            old = str(node.module)
            new = str(moved(old, moves))
            pattern = re.compile(rf"(\bfrom\s+){re.escape(old)}(?![\w.])")
            lines[node.lineno - 1] = pattern.sub(rf"\g<1>{new}", lines[node.lineno - 1], count=1)
        path.write_text("".join(lines), encoding="utf-8")
        changed.append(str(path.relative_to(root)))
    return changed


def main(argv: list[str]) -> int:
    stage, framework = argv[1], argv[2]
    moves = MOVES.get(framework, {})
    root = Path.cwd()
    if stage == "check":
        refusals = check(root, moves)
        for sentence in refusals:
            print(f"The update stops, nothing written: {sentence}.", file=sys.stderr)
        return 1 if refusals else 0
    for name in apply(root, moves):
        print(f"  {name}: imports moved to {framework}")
    # Asked interactively, the new answer was not known before the update: say what is left.
    left = check(root, moves)
    for sentence in left:
        print(f"Change by hand: {sentence}.", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
