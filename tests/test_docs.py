"""The docs show the matrix as loops.py has it."""

from __future__ import annotations

from docs.hooks import matrix as docs_matrix
from tests.conftest import TEMPLATE_ROOT


def test_docs_matrix_block_is_current() -> None:
    page = (TEMPLATE_ROOT / "docs" / "engines.md").read_text()
    assert "<!-- matrix:start -->" in page
    assert docs_matrix.fill(page) == page, "run: python docs/hooks/matrix.py"
    for python in ("3.11", "3.14"):
        assert f"| {python} | uvicorn |" in page
    assert "| uvicorn | httptools if installed, else h11 |" in page
