"""The questions: impossible answers are refused with the matrix's sentence."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from extensions.matrix import loops, short_reason
from tests.conftest import COPIER_YML, TEMPLATE_ROOT

COPIER = str(Path(sys.executable).with_name("copier"))
REFUSED = [cell for cell in loops.matrix() if not cell.allowed]


def answers(cell: loops.MatrixCell) -> dict[str, str]:
    return {"python_version": cell.python, "default_engine": cell.engine, "loop_policy": cell.loop}


def choice_values(question: str) -> tuple[str, ...]:
    choices = COPIER_YML[question]["choices"]
    if isinstance(choices, list):
        return tuple(map(str, choices))
    return tuple(str(c["value"] if isinstance(c, dict) else c) for c in choices.values())


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("python_version", loops.PYTHON_VERSIONS),
        ("default_engine", loops.ENGINES),
        ("loop_policy", loops.LOOP_POLICIES),
    ],
)
def test_choices_are_the_matrix(question: str, expected: tuple[str, ...]) -> None:
    assert choice_values(question) == expected


@pytest.mark.parametrize("cell", REFUSED, ids=lambda c: f"{c.python}-{c.engine}-{c.loop}")
def test_impossible_combination_renders_nothing(copie, cell: loops.MatrixCell) -> None:
    result = copie.copy(extra_answers=answers(cell))
    assert result.exit_code != 0
    # pytest-copie's answers meet the choice's check first, which gives the sentence's
    # head, as an interactive prompt shows it (--data gets the whole sentence, below).
    assert cell.refusal and short_reason(cell.refusal) in str(result.exception)
    assert result.project_dir is None


BAD_COMMAND_LINES = [
    (["-d", "loop_policy=zuvloop"], "zuvloop needs Python 3.14 or newer"),
    (["-d", "default_engine=granian", "-d", "python_version=3.14", "-d", "loop_policy=zuvloop"],
     "zuvloop needs the uvicorn engine"),
    (["-d", "loop_policy=rloop"], "rloop needs the granian engine"),
    (["-d", "loop_policy=trio"], "loop_policy 'trio' is refused"),
    (["-d", "default_engine=nginx"], "default_engine 'nginx' is refused"),
    (["-d", "python_version=3.10"], "python_version '3.10' is refused"),
    (["-d", "port=http"], "port 'http' is refused"),
    (["-d", "workers=0"], "workers '0' is refused"),
    (["-d", "project_name=9 lives"], "project_name '9 lives' is refused"),
]


@pytest.mark.parametrize(("data", "sentence"), BAD_COMMAND_LINES, ids=str)
def test_copier_command_line_refuses_with_one_sentence(
    tmp_path: Path, data: list[str], sentence: str
) -> None:
    destination = tmp_path / "project"
    result = subprocess.run(
        [COPIER, "copy", "--trust", "--defaults", "--quiet", "-r", "HEAD", *data,
         str(TEMPLATE_ROOT), str(destination)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 1
    assert sentence in result.stderr
    assert "Traceback" not in result.stderr
    assert not destination.exists()


def test_answers_file_records_every_answer(copie) -> None:
    given = {"project_name": "Fast Thing", "python_version": "3.12", "default_engine": "granian",
             "loop_policy": "rloop", "port": 8081, "workers": 2, "description": "d"}
    result = copie.copy(extra_answers=given)
    assert result.exit_code == 0, result.exception
    recorded = yaml.safe_load((result.project_dir / ".copier-answers.yml").read_text())
    assert {key: recorded[key] for key in given} == given
    # The answers are the settings' defaults (answers.py, listed in .env.example);
    # .env holds no setting until the user writes one.
    answers_py = (result.project_dir / "app/core/answers.py").read_text()
    assert '"default_engine": "granian"' in answers_py and '"port": 8081' in answers_py
    example = (result.project_dir / ".env.example").read_text()
    assert "WEBSERVER_ENGINE=granian\n" in example and "WEBSERVER_LOOP=rloop\n" in example
    env = (result.project_dir / ".env").read_text()
    assert not [line for line in env.splitlines() if line and not line.startswith("#")]
    assert (result.project_dir / ".python-version").read_text().strip() == "3.12"
