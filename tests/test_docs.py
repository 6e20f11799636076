"""The docs build strictly, show the matrix as loops.py has it, and the CI files validate."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from docs.hooks import matrix as docs_matrix
from tests.conftest import TEMPLATE_ROOT

BIN = Path(sys.executable).parent
QUIET = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
PROJECT_WORKFLOWS = [TEMPLATE_ROOT / "template/.github/workflows" / name
                     for name in ("ci.yml", "template-update.yml", "upstream.yml")]
WORKFLOWS = [TEMPLATE_ROOT / ".github/workflows/ci.yml",
             TEMPLATE_ROOT / ".github/workflows/upstream.yml", *PROJECT_WORKFLOWS]


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "mkdocs"), "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=root, env=QUIET, capture_output=True, text=True, timeout=120,
    )


def test_docs_blocks_are_current() -> None:
    for name in ("engines.md", "troubleshooting.md"):
        page = (TEMPLATE_ROOT / "docs" / name).read_text()
        assert docs_matrix.fill(page) == page, "run: python docs/hooks/matrix.py"
    engines = (TEMPLATE_ROOT / "docs" / "engines.md").read_text()
    for python in ("3.11", "3.14"):
        assert f"| {python} | uvicorn |" in engines
    assert "| uvicorn | httptools if installed, else h11 |" in engines


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    result = build(TEMPLATE_ROOT, tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    page = (tmp_path / "site" / "troubleshooting" / "index.html").read_text()
    assert "rloop needs the granian engine" in page


def test_matrix_in_the_built_docs_follows_loops_py(tmp_path: Path) -> None:
    # A copy of the docs and the matrix, with zuvloop's minimum Python changed.
    for part in ("docs", "mkdocs.yml", "template/app", "template/serving", "extensions"):
        source, target = TEMPLATE_ROOT / part, tmp_path / part
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, target)
    loops_py = tmp_path / "template/app/core/loops.py"
    text = loops_py.read_text()
    assert "min_python=(3, 14)" in text
    loops_py.write_text(text.replace("min_python=(3, 14)", "min_python=(3, 12)"))

    result = build(tmp_path, tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    engines = (tmp_path / "site" / "engines" / "index.html").read_text()
    assert "zuvloop needs Python 3.12 or newer" in engines
    assert "zuvloop needs Python 3.14 or newer" not in engines


def test_workflows_validate_against_the_github_schema() -> None:
    result = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
         *map(str, WORKFLOWS)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_template_workflows_are_copied_verbatim(copie) -> None:
    result = copie.copy()
    assert result.exit_code == 0, result.exception
    for workflow in PROJECT_WORKFLOWS:
        rendered = result.project_dir / ".github/workflows" / workflow.name
        assert rendered.read_text() == workflow.read_text()


def test_each_upgrade_note_the_suite_relies_on_is_in_the_docs() -> None:
    """tests/test_update.py finishes a pre-0.4.0 update as docs/index.md says: the note
    must be there, and one for each CHANGELOG entry that says what upgrading needs."""
    page = (TEMPLATE_ROOT / "docs" / "index.md").read_text()
    notes = page.split("### Upgrade notes", 1)[1].split("\n## ", 1)[0]
    assert "app/routes/" in notes and "git checkout --theirs" in notes
    changelog = (TEMPLATE_ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## (\d+\.\d+\.\d+)\n\nUpgrading from", changelog, re.M)
    titles = re.findall(r"^- \*\*([^*]+)\*\*", notes, re.M)  # each note's bold title
    for release in releases:
        assert any(release in title for title in titles), f"no upgrade note for {release}"


DOCS_LINK = re.compile(r'docs/([a-z-]+\.md)(?:, "([^"\n]+)"|, ([A-Z][A-Za-z]+))?')


def test_every_docs_link_in_a_project_names_a_page_and_section_it_ships(copie) -> None:
    """The project's code and README cite `docs/<page>.md` (and a section): the
    project carries those pages (template/docs/, the template's own docs at its
    version)."""
    result = copie.copy(extra_answers={})
    assert result.exit_code == 0, result.exception
    project = result.project_dir
    cited = 0
    for path in project.rglob("*"):
        if not path.is_file() or {"docs", ".git", ".venv"} & set(path.relative_to(project).parts):
            continue
        for match in DOCS_LINK.finditer(path.read_text(errors="replace")):
            page = project / "docs" / match[1]
            assert page.is_file(), f"{path.relative_to(project)} cites a missing {match[0]}"
            section = match[2] or match[3]
            if section:
                headings = [line.lstrip("#").strip() for line in page.read_text().splitlines()
                            if line.startswith("#")]
                assert any(heading.startswith(section) for heading in headings), \
                    f"{path.relative_to(project)} cites {match[0]}: no such section"
            cited += 1
    assert cited > 20  # the project's code does cite its docs
