"""The engine x loop matrix and its refusals in the docs, from template/app/core/loops.py.

Used two ways: as a mkdocs hook (the built site always shows the current matrix) and
as a script, `python docs/hooks/matrix.py`, that rewrites the block in docs/*.md so the
Markdown read on a forge shows it too. The template's tests check the block is current.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

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
        from extensions.matrix import load_template_module, loops, setting_specs
    finally:
        sys.path.remove(str(ROOT))
    tables = load_template_module("app/core/matrix_markdown.py")
    blocks = {"matrix": lambda: tables.tables(loops), "refusals": lambda: tables.refusals(loops),
              "features": lambda: tables.feature_table(loops),
              "evidence": lambda: tables.evidence(loops),
              "settings": setting_specs.markdown_table}
    return BLOCK.sub(lambda m: m.group(1) + blocks[m.group(2)]() + m.group(3), markdown)


def on_page_markdown(markdown: str, **_: object) -> str:
    return fill(markdown)


if __name__ == "__main__":
    for page in DOCS.glob("*.md"):
        text = page.read_text()
        if fill(text) != text:
            page.write_text(fill(text))
            print(f"updated {page}")
