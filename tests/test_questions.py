"""The questions: impossible answers are refused with the matrix's sentence."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
import unicodedata
from pathlib import Path

import pytest
import yaml

from extensions.matrix import (
    VALUE_RULES,
    MatrixCell,
    loops,
    matrix,
    prompt_refusal,
    setting_specs,
    short_reason,
    value_refusal,
)
from tests.conftest import COPIER_YML, TEMPLATE_ROOT

COPIER = str(Path(sys.executable).with_name("copier"))
REFUSED = [cell for cell in matrix() if not cell.allowed]


def answers(cell: MatrixCell) -> dict[str, str]:
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
        ("served_engines", loops.ENGINES),
        ("served_loops", tuple(loops.LOOPS)),
        ("database", tuple(loops.DATABASES)),
    ],
)
def test_choices_are_the_matrix(question: str, expected: tuple[str, ...]) -> None:
    assert choice_values(question) == expected


@pytest.mark.parametrize("cell", REFUSED, ids=lambda c: f"{c.python}-{c.engine}-{c.loop}")
def test_impossible_combination_renders_nothing(copie, cell: MatrixCell) -> None:
    result = copie.copy(extra_answers=answers(cell))
    assert result.exit_code != 0
    # pytest-copie's answers meet the choice's check first, which gives the sentence's
    # head, as an interactive prompt shows it (--data gets the whole sentence, below).
    assert cell.refusal and short_reason(cell.refusal) in str(result.exception)
    assert result.project_dir is None


def test_privileged_port_from_user_defaults_renders_nothing(copie) -> None:
    # Copier checks a user default as it checks an answer typed at the prompt.
    result = copie.copy(extra_answers={"port": 80})
    assert result.exit_code != 0 and result.project_dir is None
    assert prompt_refusal("port", 80) == "the image is non-root: give 1024 or more."
    assert str(result.exception).endswith(prompt_refusal("port", 80))


BAD_COMMAND_LINES = [
    (["-d", "loop_policy=zuvloop"], "zuvloop needs Python 3.14 or newer"),
    (["-d", "default_engine=granian", "-d", "python_version=3.14", "-d", "loop_policy=zuvloop"],
     "zuvloop needs the uvicorn engine"),
    (["-d", "loop_policy=rloop"], "rloop needs the granian engine"),
    (["-d", "loop_policy=trio"], "trio needs the hypercorn engine: uvicorn runs asyncio event "
     "loops only, and trio is not one"),
    (["-d", "default_engine=nginx"], "default_engine 'nginx' is refused"),
    (["-d", "python_version=3.10"], "python_version '3.10' is refused"),
    (["-d", "port=http"], "port 'http' is refused: give a whole number from 1 to 65535."),
    (["-d", "port=80"], "port '80' is refused: the image runs as a non-root user, which may "
     "not listen below 1024; answer 1024 or above and map the public port"),
    (["-d", "workers=0"], "workers '0' is refused: give a whole number from 1 to 64."),
    (["-d", "project_name=9 lives"], "project_name '9 lives' is refused: start with a letter"),
    (["-d", "served_engines=[granian, hypercorn]"], "served_engines ['granian', 'hypercorn'] "
     "is refused: it leaves out uvicorn, the answered engine; add it, or answer another "
     "default_engine."),
    (["-d", "default_engine=hypercorn", "-d", "loop_policy=trio", "-d",
      "served_loops=[asyncio, uvloop]"], "served_loops ['asyncio', 'uvloop'] is refused: it "
     "leaves out trio, the answered loop; add it, or answer another loop_policy."),
    (["-d", "served_loops=[asyncio, tokio]"], "served_loops '[asyncio, tokio]' is refused: "
     "list some of asyncio, uvloop, rloop, zuvloop, trio ('tokio' is not one)."),
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
    # .env holds none of them, only development's API docs and examples, until the user
    # writes one.
    answers_py = (result.project_dir / "app/core/answers.py").read_text()
    assert '"default_engine": "granian"' in answers_py and '"port": 8081' in answers_py
    example = (result.project_dir / ".env.example").read_text()
    assert "WEBSERVER_ENGINE=granian\n" in example and "WEBSERVER_LOOP=rloop\n" in example
    env = (result.project_dir / ".env").read_text()
    assert [line for line in env.splitlines() if line and not line.startswith("#")] == [
        "WEBSERVER_API_DOCS=true", "WEBSERVER_EXAMPLES=true"]
    assert (result.project_dir / ".python-version").read_text().strip() == "3.12"


# Copier shows a validator's message on one line under the question, after this prefix,
# and cuts it at the terminal's width (prompt_toolkit's ValidationToolbar, one row).
COPIER_PREFIX = "Validation error for question '{question}': "
COLUMNS = 80
# Values each rule refuses for each of its reasons (a whole number out of bounds, not a
# number, a privileged port, a name's first letter or any character it refuses).
REFUSED_VALUES = {
    "port": ["0", "-1", "65536", "http", "1.5", "80", "443", "1023"],
    "workers": ["0", "65", "many", "2.5"],
    "project_name": ["", "9 lives", " x", "-x", "é", *(f"a{chr(c)}b" for c in range(0x110)
                                                      if not re.fullmatch(r"[A-Za-z0-9 _-]",
                                                                          chr(c)))],
}


def display_width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def interactive_refusals() -> list[tuple[str, str]]:
    """Every (question, message) the questions can show while asking."""
    shown = [(question, prompt_refusal(question, value))
             for question, values in REFUSED_VALUES.items() for value in values]
    # loop_policy is a list: a refused loop is shown disabled, its reason after it.
    titles = {str(choice["value"]): title
              for title, choice in COPIER_YML["loop_policy"]["choices"].items()}
    shown += [("loop_policy", f"   - {titles[cell.loop]} ({short_reason(cell.refusal)})")
              for cell in REFUSED]
    return shown


def test_every_interactive_refusal_fits_80_columns() -> None:
    """Copier cuts the message at the terminal's edge: each one is whole at 80 columns."""
    for question, message in interactive_refusals():
        assert message, question
        line = message if question == "loop_policy" else COPIER_PREFIX.format(
            question=question) + message
        assert display_width(line) <= COLUMNS, line


def test_every_value_refused_while_asking_is_refused_on_the_command_line() -> None:
    for question, values in REFUSED_VALUES.items():
        for value in values:
            sentence = value_refusal(question, value)
            assert sentence.startswith(f"{question} {value!r} is refused: "), sentence
    assert set(REFUSED_VALUES) <= set(VALUE_RULES)


def test_port_and_workers_are_worded_as_serve_words_them() -> None:
    """One declaration of the bounds (setting_specs), one wording, asked or served."""
    for question in ("port", "workers"):
        wanted = setting_specs.BY_NAME[question].wanted()
        assert prompt_refusal(question, "0") == f"{wanted}."
        assert value_refusal(question, "0") == f"{question} '0' is refused: {wanted}."
    assert prompt_refusal("port", "1024") == "" and prompt_refusal("port", "1023")
    assert "1024-65535" in COPIER_YML["port"]["help"] or "answer_range('port')" in (
        COPIER_YML["port"]["help"])


class Screen:
    """What a terminal shows: enough of VT100 for prompt_toolkit's output."""

    CSI = re.compile(r"\x1b\[([0-9;?]*)([ -/]*)([@-~])")
    OTHER = re.compile(r"\x1b(\][^\x07]*\x07|[()][0-9A-B]|[=>78])")

    def __init__(self, columns: int, lines: int) -> None:
        self.columns, self.lines = columns, lines
        self.rows = [[" "] * columns for _ in range(lines)]
        self.row = self.col = 0
        self.wrap = True

    def feed(self, text: str) -> None:
        at = 0
        while at < len(text):
            if csi := self.CSI.match(text, at):
                self._csi(csi.group(1), csi.group(3))
                at = csi.end()
            elif other := self.OTHER.match(text, at):
                at = other.end()
            else:
                self._char(text[at])
                at += 1

    def _newline(self) -> None:
        if self.row == self.lines - 1:
            self.rows = [*self.rows[1:], [" "] * self.columns]
        else:
            self.row += 1

    def _char(self, char: str) -> None:
        if char == "\r":
            self.col = 0
        elif char == "\n":
            self._newline()
        elif char == "\b":
            self.col = max(0, self.col - 1)
        elif char >= " ":
            width = 2 if unicodedata.east_asian_width(char) in "WF" else 1
            if self.col + width > self.columns:
                if self.wrap:
                    self.col = 0
                    self._newline()
                else:
                    self.col = self.columns - width
            self.rows[self.row][self.col] = char
            if width == 2:
                self.rows[self.row][self.col + 1] = ""
            self.col += width

    def _csi(self, params: str, final: str) -> None:
        private = params.startswith("?")
        numbers = [int(n) if n else 0 for n in params.lstrip("?").split(";")]
        n = max(numbers[0], 1)
        if private:
            if 7 in numbers and final in "hl":
                self.wrap = final == "h"
        elif final == "A":
            self.row = max(0, self.row - n)
        elif final == "B":
            self.row = min(self.lines - 1, self.row + n)
        elif final == "C":
            self.col = min(self.columns - 1, self.col + n)
        elif final == "D":
            self.col = max(0, self.col - n)
        elif final in "Hf":
            row, col = ([*numbers, 0][:2])
            self.row, self.col = max(row, 1) - 1, max(col, 1) - 1
        elif final == "K":
            start, end = {0: (self.col, self.columns), 1: (0, self.col + 1),
                          2: (0, self.columns)}[numbers[0]]
            self.rows[self.row][start:end] = [" "] * (end - start)
        elif final == "J" and numbers[0] in (0, 2):
            self.rows[self.row][self.col:] = [" "] * (self.columns - self.col)
            for row in range(self.row + 1 if numbers[0] == 0 else 0, self.lines):
                if row != self.row:
                    self.rows[row] = [" "] * self.columns

    def text(self) -> list[str]:
        return ["".join(row).rstrip() for row in self.rows]


def test_the_prompt_shows_a_refusal_whole_at_80_columns(tmp_path: Path) -> None:
    """Copier asked in a real terminal of 80 columns: port 0 shows the whole reason."""
    master, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
    env = {**os.environ, "COLUMNS": str(COLUMNS), "LINES": "24", "TERM": "xterm",
           "PROMPT_TOOLKIT_NO_CPR": "1", "PYTHONWARNINGS": "ignore"}
    destination = tmp_path / "project"
    process = subprocess.Popen(
        [COPIER, "copy", "--trust", "-r", "HEAD", str(TEMPLATE_ROOT), str(destination)],
        stdin=terminal, stdout=terminal, stderr=terminal, env=env, start_new_session=True,
    )
    os.close(terminal)
    screen, output = Screen(COLUMNS, 24), b""

    def shown(text: str, timeout: float = 60) -> str:
        nonlocal output
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    output += os.read(master, 65536)
                except OSError:
                    break
                screen.rows = [[" "] * COLUMNS for _ in range(24)]
                screen.row = screen.col = 0
                screen.feed(output.decode(errors="replace"))
                line = next((line for line in screen.text() if text in line), None)
                if line is not None:
                    return line
        raise AssertionError(f"{text!r} never shown:\n" + "\n".join(screen.text()))

    try:
        # The questions before port, each answered with its default.
        asked = [spec["help"][:12] for name, spec in COPIER_YML.items()
                 if isinstance(spec, dict) and "help" in spec and spec.get("when") is not False]
        shown(asked[0])
        for question in asked[1:asked.index(COPIER_YML["port"]["help"][:12]) + 1]:
            os.write(master, b"\r")
            shown(question)
        os.write(master, b"\x150\r")  # Ctrl-U clears the default, then 0
        prefix = COPIER_PREFIX.format(question="port")
        line = shown(prefix)
        assert line == prefix + prompt_refusal("port", 0), line
    finally:
        process.kill()
        process.wait(timeout=10)
        os.close(master)
    assert not destination.exists()
