"""The engine x loop matrix and its refusals in the docs, from template/app/core/loops.py.

Used two ways: as a mkdocs hook (the built site always shows the current matrix) and
as a script, `python docs/hooks/matrix.py`, that rewrites the block in docs/*.md so the
Markdown read on a forge shows it too. The template's tests check the block is current.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# <!-- NAME:start --> ... <!-- NAME:end --> blocks, each filled by one function.
BLOCK = re.compile(
    r"(<!-- (matrix|refusals|features|settings|evidence):start -->\n).*?(<!-- \2:end -->)",
    re.DOTALL)


def fill(markdown: str) -> str:
    # This checkout's template, read the one way the template's tooling reads it.
    sys.path.insert(0, str(ROOT))
    try:
        from extensions.matrix import load_template_module, loops, settings_markdown
    finally:
        sys.path.remove(str(ROOT))
    tables = load_template_module("app/core/matrix_markdown.py")
    blocks = {"matrix": lambda: tables.tables(loops), "refusals": lambda: refusals(loops),
              "features": lambda: feature_table(loops), "evidence": lambda: evidence(loops),
              "settings": settings_markdown}
    return BLOCK.sub(lambda m: m.group(1) + blocks[m.group(2)]() + m.group(3), markdown)


# What only the docs show: the service's `engines --markdown` prints the tables alone.
def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def evidence(loops: ModuleType) -> str:
    """Each engine x loop pair, its verdict, and what was run or seen to decide it."""
    lines = [_row(["engine", "loop", "verdict", "evidence"]), _row(["---"] * 4)]
    for engine in loops.ENGINES:
        for name, spec in loops.LOOPS.items():
            if engine in spec.engine_values:
                newer = (f" (Python {loops.version_text(spec.min_python)}+)"
                         if spec.min_python > loops.python_version(loops.PYTHON_VERSIONS[0])
                         else "")
                lines.append(_row([engine, name, f"accepted{newer}", spec.verified[engine]]))
            else:
                lines.append(_row([engine, name, "refused", spec.refused_because[engine]]))
    return "\n".join(lines) + "\n"


def refusals(loops: ModuleType) -> str:
    """Every sentence the matrix can refuse with (engine, loop, parser, pings), as a list."""
    sentences: list[str] = []
    for python in loops.PYTHON_VERSIONS:
        for engine in loops.ENGINES:
            for name in loops.LOOPS:
                reason = loops.refusal_reason(engine, name, loops.python_version(python))
                if reason and f"{reason}." not in sentences:
                    sentences.append(f"{reason}.")
    for engine in loops.ENGINES:
        for name in loops.HTTP_PARSERS:
            for http2 in (False, True):
                reason = loops.http_refusal(engine, name, http2) or (
                    loops.http_refusal(engine, loops.AUTO, http2))
                if reason and reason not in sentences:
                    sentences.append(reason)
        for feature in loops.FEATURES.values():
            reason = loops.feature_refusal(engine, feature.setting, "N")
            if reason and reason not in sentences:
                sentences.append(reason)
    return "".join(f"- {sentence}\n" for sentence in sentences)


def feature_table(loops: ModuleType) -> str:
    """Which engine honours each setting, and through which of its own options."""
    lines = [_row(["setting", *loops.ENGINES]), _row(["---"] * (1 + len(loops.ENGINES)))]
    for feature in loops.FEATURES.values():
        cells = [f"`WEBSERVER_{feature.setting.upper()}`"]
        for engine in loops.ENGINES:
            how = feature.honoured_by.get(engine)
            cells.append(f"`{how}`" if how and " " not in how else how or
                         f"refused: {feature.refused_because[engine]}")
        lines.append(_row(cells))
    return "\n".join(lines) + "\n"


def on_page_markdown(markdown: str, **_: object) -> str:
    return fill(markdown)


if __name__ == "__main__":
    for page in DOCS.glob("*.md"):
        text = page.read_text()
        if fill(text) != text:
            page.write_text(fill(text))
            print(f"updated {page}")
