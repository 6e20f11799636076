"""The engine x loop matrix and its refusals in the docs, from template/app/core/loops.py.

Used two ways: as a mkdocs hook (the built site always shows the current matrix) and
as a script, `python docs/hooks/matrix.py`, that rewrites the block in docs/*.md so the
Markdown read on a forge shows it too. The template's tests check the block is current.
"""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path
from types import ModuleType

TEMPLATE = Path(__file__).resolve().parents[2] / "template"
DOCS = Path(__file__).resolve().parents[1]
# <!-- NAME:start --> ... <!-- NAME:end --> blocks, each filled by one function.
BLOCK = re.compile(r"(<!-- (matrix|refusals|features|settings):start -->\n).*?(<!-- \2:end -->)",
                   re.DOTALL)


def _matrix_markdown() -> ModuleType:
    sys.path.insert(0, str(TEMPLATE))
    try:
        # Always this template's copy, even if another `app` was imported before.
        for name in [n for n in sys.modules if n == "app" or n.startswith("app.")]:
            del sys.modules[name]
        module = importlib.import_module("app.core.matrix_markdown")
        importlib.import_module("app.core.setting_specs")
        return module
    finally:
        sys.path.remove(str(TEMPLATE))


def fill(markdown: str) -> str:
    module = _matrix_markdown()
    specs = importlib.import_module("app.core.setting_specs")
    blocks = {"matrix": module.tables, "refusals": module.refusals,
              "features": module.feature_table, "settings": specs.markdown_table}
    return BLOCK.sub(lambda m: m.group(1) + blocks[m.group(2)]() + m.group(3), markdown)


def on_page_markdown(markdown: str, **_: object) -> str:
    return fill(markdown)


if __name__ == "__main__":
    for page in DOCS.glob("*.md"):
        text = page.read_text()
        if fill(text) != text:
            page.write_text(fill(text))
            print(f"updated {page}")
