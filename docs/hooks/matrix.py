"""The engine x loop matrix in the docs, rendered from template/app/core/loops.py.

Used two ways: as a mkdocs hook (the built site always shows the current matrix) and
as a script, `python docs/hooks/matrix.py`, that rewrites the block in docs/*.md so the
Markdown read on a forge shows it too. The template's tests check the block is current.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

TEMPLATE = Path(__file__).resolve().parents[2] / "template"
DOCS = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- matrix:start -->\n).*?(<!-- matrix:end -->)", re.DOTALL)


def tables() -> str:
    sys.path.insert(0, str(TEMPLATE))
    try:
        from app.core import matrix_markdown
    finally:
        sys.path.remove(str(TEMPLATE))
    return matrix_markdown.tables()


def fill(markdown: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + tables() + m.group(2), markdown)


def on_page_markdown(markdown: str, **_: object) -> str:
    return fill(markdown)


if __name__ == "__main__":
    for page in DOCS.glob("*.md"):
        text = page.read_text()
        if fill(text) != text:
            page.write_text(fill(text))
            print(f"updated {page}")
