"""Copier Jinja extension: the questions' validators, read from the project's own matrix.

The rules live in `template/app/core/loops.py`, the module the generated project runs
with; this file loads it from the template so both always agree.

A refused answer given on the command line (`--data`, `--defaults`) raises Copier's
UserMessageError, which Copier prints as one red sentence with exit code 1 and nothing
rendered; the same check asked interactively returns the reason alone, short enough
for the one line Copier shows it on at 80 columns, and Copier asks again.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from copier.errors import UserMessageError
from copier_template_extensions import ContextHook
from jinja2 import pass_context
from jinja2.ext import Extension
from jinja2.runtime import Context

TEMPLATE = Path(__file__).resolve().parents[1] / "template"
NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9 _-]*")
NAME_ALLOWED = re.compile(r"[A-Za-z0-9 _-]")


def load_template_module(relative: str) -> ModuleType:
    """A module of the generated project, loaded from the template by its path.

    The one way the template's own tooling (this extension, its tests, the docs hook)
    reads project code: the module must not import the `app` package at its top.
    """
    path = TEMPLATE / relative
    spec = importlib.util.spec_from_file_location(f"_template_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


def load_template_package(name: str) -> ModuleType:
    """A package of the generated project, importable here by its own name, so a module
    loaded by path can import from it as it does in the project (tests/drain.py reads
    responses with `bench.http1`). Its modules must not import `app` at their top."""
    path = TEMPLATE / name
    spec = importlib.util.spec_from_file_location(
        name, path / "__init__.py", submodule_search_locations=[str(path)])
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


loops = load_template_module("app/core/loops.py")
setting_specs = load_template_module("app/core/setting_specs.py")


@dataclass(frozen=True)
class MatrixCell:
    """One Python x engine x loop policy, with the matrix's verdict."""

    python: str
    engine: str
    loop: str
    refusal: str | None

    @property
    def allowed(self) -> bool:
        return self.refusal is None


def matrix(pythons: tuple[str, ...] = loops.PYTHON_VERSIONS) -> list[MatrixCell]:
    """Every Python x engine x loop policy, with its verdict (the questions' and the
    combinations' tests walk it; the service never needs the whole product)."""
    return [
        MatrixCell(py, engine, loop, loops.refusal(engine, loop, loops.python_version(py)))
        for py in pythons
        for engine in loops.ENGINES
        for loop in loops.LOOP_POLICIES
    ]


def env_example_for(answers: dict[str, object]) -> str:
    """`.env.example`: every setting with its help and default, for these answers."""
    answers = served_as(answers)
    lines = [
        "# Every setting, with its default (the Copier answers among them). Put only the",
        "# ones you change in .env; command-line flags of `serve` win over both.",
    ]
    for spec in setting_specs.declared(answers):
        accepts = f" ({spec.accepts()})" if spec.accepts() else ""
        lines += [f"# {spec.help}{accepts}",
                  f"{spec.env}={spec.text(spec.default_for(answers))}"]
    return "\n".join(lines) + "\n"


def settings_markdown(answers: dict[str, object] | None = None) -> str:
    """The settings table (rendered README, docs); without answers, answer defaults are
    named, not valued."""
    rows = ["| setting | default | what it controls |", "|---|---|---|"]
    every = {"database": "any"}  # the guide names the database's settings too
    answers = served_as(answers) if answers is not None else None
    for spec in setting_specs.declared(every if answers is None else answers):
        if answers is None and isinstance(spec.default, setting_specs.Answer):
            default = f"the `{spec.default.question}` answer"
        else:
            text = spec.text(spec.default_for(answers or {}))
            default = f"`{text}`" if text else "(empty)"
        rows.append(f"| `{spec.env}` | {default} | {spec.help} |")
    return "\n".join(rows) + "\n"


def slugify(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@dataclass(frozen=True)
class Refused:
    """An answer refused, in the two lengths Copier shows it.

    `prompt` is what the interactive question shows: the reason first, in a one-line
    toolbar after "Validation error for question 'NAME': ", cut at the terminal's
    width, so it must fit 80 columns with that prefix (tests/test_questions.py). The
    `sentence` is printed whole for --data, an answers file or pytest-copie: it names the
    question and value, then the reason and what to do.
    """

    question: str
    value: Any
    prompt: str
    advice: str = ""
    reason: str = ""  # the sentence's reason when the prompt's is a shortening of it

    @property
    def sentence(self) -> str:
        reason = self.reason or self.prompt
        advice = f"; {self.advice}" if self.advice else ""
        return f"{self.question} {self.value!r} is refused: {reason}{advice}."


def _name_refusal(value: Any) -> Refused | None:
    text = str(value)
    if NAME_PATTERN.fullmatch(text) and slugify(text):
        return None
    bad = next((char for char in text if not NAME_ALLOWED.fullmatch(char)), None)
    if not re.match("[A-Za-z]", text) or bad is None:
        prompt = "start with a letter"
    else:
        shown = repr(bad) if bad.isprintable() else f"U+{ord(bad):04X}"
        prompt = f"{shown} is not allowed"
    return Refused("project_name", text, prompt, "use only letters, digits, spaces, '-' and '_'")


def _choice_refusal(question: str, value: Any, choices: tuple[str, ...]) -> Refused | None:
    if str(value) in choices:
        return None
    return Refused(question, value, setting_specs.choose(choices))


def _names_refusal(question: str, value: Any, choices: tuple[str, ...]) -> Refused | None:
    if isinstance(value, str) and not value.strip().startswith("["):  # Copier wants a list
        return Refused(question, value, f"give a list, as [{choices[0]}, {choices[1]}]")
    given = loops.names(value)
    wrong = next((name for name in given if name not in choices), None)
    if given and wrong is None:
        return None
    return Refused(question, value, f"list some of {', '.join(choices)}"
                   + (f" ({wrong!r} is not one)" if wrong else ""))


def _whole_number(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _range_refusal(question: str, value: Any) -> Refused | None:
    """The answer that is a setting's default, bounded by the setting's declaration, so
    the question and `serve` word a wrong number alike."""
    spec = setting_specs.BY_NAME[question]
    number = _whole_number(value)
    if number is None or not spec.minimum <= number <= spec.maximum:
        return Refused(question, value, spec.wanted())
    return None


def _port_refusal(value: Any) -> Refused | None:
    refused = _range_refusal("port", value)
    floor = setting_specs.UNPRIVILEGED_PORT_MINIMUM
    if refused or (_whole_number(value) or 0) >= floor:
        return refused
    return Refused(
        "port", value, f"the image is non-root: give {floor} or more",
        reason=f"the image runs as a non-root user, which may not listen below {floor}",
        advice=f"answer {floor} or above and map the public port (80, 443) to it in the proxy "
        "or container runtime, as in `docker run -p 80:8000`",
    )


def answer_range(question: str) -> str:
    """The numbers a question accepts, for its help: '1024-65535' for port."""
    spec = setting_specs.BY_NAME[question]
    low = spec.minimum
    if question == "port":
        low = max(low, setting_specs.UNPRIVILEGED_PORT_MINIMUM)
    return f"{int(low)}-{int(spec.maximum)}"


VALUE_RULES: dict[str, Callable[[Any], Refused | None]] = {
    "project_name": _name_refusal,
    "python_version": lambda v: _choice_refusal("python_version", v, loops.PYTHON_VERSIONS),
    "default_engine": lambda v: _choice_refusal("default_engine", v, loops.ENGINES),
    "loop_policy": lambda v: _choice_refusal("loop_policy", v, loops.LOOP_POLICIES),
    "port": _port_refusal,
    "workers": lambda v: _range_refusal("workers", v),
    "served_engines": lambda v: _names_refusal("served_engines", v, loops.ENGINES),
    "served_loops": lambda v: _names_refusal("served_loops", v, tuple(loops.LOOPS)),
    "framework": lambda v: _choice_refusal("framework", v, tuple(loops.FRAMEWORKS)),
    "database": lambda v: _choice_refusal("database", v, tuple(loops.DATABASES)),
}


def _served_refusal(answers: dict[str, Any], question: str) -> Refused | None:
    """The served engines (loops) must hold the answered engine (loop)."""
    answered, kind = (("default_engine", "engine") if question == "served_engines"
                      else ("loop_policy", "loop"))
    value = str(answers[answered])
    served = loops.names(answers.get(question, ()))
    if question not in answers or value in served:
        return None
    if value != loops.AUTO:
        return Refused(question, list(served), f"it leaves out {value}, the answered {kind}",
                       advice=f"add it, or answer another {answered}")
    engine = str(answers["default_engine"])
    python = loops.python_version(str(answers["python_version"]))
    if question == "served_engines" or loops.auto_choices(engine, python, served):
        return None
    return Refused(question, list(served), f"auto picks none of them under {engine}",
                   reason=f"the loop auto picks {', '.join(loops.AUTO_PREFERENCE)} "
                   f"under {engine}, and none of them is served",
                   advice="add asyncio or uvloop")


def value_refusal(question: str, value: Any) -> str:
    """The whole sentence refusing one answer on its own, or ''."""
    refused = VALUE_RULES[question](value)
    return refused.sentence if refused else ""


def _loop_refusal(answers: dict[str, Any], loop: Any) -> str:
    python = loops.python_version(answers["python_version"])
    return loops.refusal(answers["default_engine"], str(loop), python) or ""


def _framework_refusal(answers: dict[str, Any], framework: Any) -> str:
    python = loops.python_version(answers["python_version"])
    return loops.framework_refusal(str(framework), python) or ""


def _database_refusal(answers: dict[str, Any], database: Any) -> str:
    """The database's driver must run on the answered loop. The served loops it cannot
    run are left out of what the project serves (served_loops_for), not refused: an
    update that adds a database keeps the project's served_loops answer."""
    return loops.database_refusal(str(database), (str(answers["loop_policy"]),)) or ""


def served_as(answers: dict[str, object]) -> dict[str, object]:
    """The answers with served_loops as the project serves them (served_loops_for)."""
    if "served_loops" not in answers:
        return answers
    database = str(answers.get("database", loops.NO_DATABASE))
    return {**answers, "served_loops": served_loops_for(answers["served_loops"], database)}


def served_loops_for(served: Any, database: str) -> list[str]:
    """The loops a project serves: its served_loops answer, less those its database's
    driver cannot run."""
    return list(loops.database_loops(database, loops.names(served)))


def database_default_url(database: str) -> str:
    return loops.DATABASES[database].default_url if database in loops.DATABASES else ""


def default_served_loops(loop_policy: str, database: str) -> list[str]:
    """Every asyncio loop the database's driver runs on, and trio when it is the answer."""
    every = [name for name, spec in loops.LOOPS.items()
             if spec.asyncio or name == loop_policy]
    return list(loops.database_loops(database, tuple(every))
                if database in loops.DATABASES else every)


def short_reason(sentence: str) -> str:
    """The head of a refusal, for an interactive prompt that cuts lines at 80 columns:
    'rloop needs the granian engine: under uvicorn ...' -> 'rloop needs the granian
    engine.' The whole sentence is what --data and the docs give."""
    return re.split(r":| \(|;", sentence, maxsplit=1)[0].rstrip(".") + "." if sentence else ""


def _given_on_command_line(context: Context) -> dict[str, Any]:
    conf = context.get("_copier_conf")
    return dict(conf["data"] or {}) if conf is not None else {}


@pass_context
def check_command_line(context: Context) -> str:
    """Refuse any --data answer that is wrong on its own, before Copier parses it.

    Copier casts and matches a --data answer against its choices before any
    validator runs, and reports a failure there with a traceback; this runs first
    (a computed question at the top of copier.yml) so the person gets a sentence.
    """
    for question, value in _given_on_command_line(context).items():
        reason = value_refusal(question, value) if question in VALUE_RULES else ""
        if reason:
            raise UserMessageError(reason)
    return ""


@pass_context
def refusal(context: Context, question: str, value: Any) -> str:
    """Why `value` is refused for `question`, short, the reason first ('' when fine).

    Used as a question validator and, for choice questions, as each choice's
    validator (an empty result leaves the choice selectable); a refused --data answer
    raises the whole sentence instead.
    """
    answers = dict(context.items())
    if question == "loop_policy":
        given = _given_on_command_line(context).get(question)
        if given is not None:
            reason = _loop_refusal(answers, given)
            if reason:
                raise UserMessageError(reason)
        return short_reason(_loop_refusal(answers, value))
    if question == "database":
        given = _given_on_command_line(context).get(question)
        if given is not None:  # an update replays every answer here: only the given one
            reason = value_refusal(question, given) or _database_refusal(answers, given)
            if reason:
                raise UserMessageError(reason)
        return short_reason(value_refusal(question, value) or _database_refusal(answers, value))
    if question == "framework":
        reason = _framework_refusal(answers, value)
        if reason and question in _given_on_command_line(context):
            raise UserMessageError(reason)
        return short_reason(reason)
    if question in ("served_engines", "served_loops"):
        if question in _given_on_command_line(context):
            return ""  # AnswersCheck refuses it with the whole sentence, before writing
        refused = _served_refusal({**answers, question: value}, question)
        return prompt_refusal(question, value) or (f"{refused.prompt}." if refused else "")
    return prompt_refusal(question, value)


def prompt_refusal(question: str, value: Any) -> str:
    """What the interactive question shows for a value refused on its own, or ''."""
    refused = VALUE_RULES[question](value)
    return f"{refused.prompt}." if refused else ""


def answers_refusal(answers: dict[str, Any]) -> str:
    """The first sentence refusing a set of answers, or ''."""
    for question in VALUE_RULES:
        reason = value_refusal(question, answers[question]) if question in answers else ""
        if reason:
            return reason
    return (_loop_refusal(answers, answers["loop_policy"])
            or _framework_refusal(answers, answers.get("framework", "fastapi"))
            or _database_refusal(answers, answers.get("database", loops.NO_DATABASE))
            or next((refused.sentence for question in ("served_engines", "served_loops")
                     if (refused := _served_refusal(answers, question))), ""))


class AnswersCheck(ContextHook):
    """Refuse to render answers that arrived without a question's check.

    Answers from `--defaults` with user defaults, from an answers file or from
    pytest-copie skip the validators; this last check runs before the first file is
    written, so an impossible project is never rendered.
    """

    # Copier builds a Jinja environment, with this hook, per render of one answer set:
    # once those answers pass, the hook need not check them again for each file.
    passed = False

    def hook(self, context: dict[str, Any]) -> None:
        if self.passed or context.get("_copier_phase") != "render":
            return
        reason = answers_refusal(context)
        if reason:
            raise UserMessageError(reason)
        self.passed = True


@pass_context
def env_example(context: Context) -> str:
    """`.env.example`, from the settings' declaration and this project's answers."""
    return env_example_for(dict(context.items()))


@pass_context
def settings_table(context: Context) -> str:
    return settings_markdown(dict(context.items()))


@pass_context
def setting_default(context: Context, name: str) -> str:
    """A setting's default for these answers, as the environment spells it."""
    spec = setting_specs.BY_NAME[name]
    return spec.text(spec.default_for(dict(context.items())))


@pass_context
def memory_limit_mib(context: Context) -> int:
    """The container's memory limit for these answers (app/core/setting_specs.py)."""
    answers = dict(context.items())
    budget = setting_specs.BY_NAME["body_budget"].default_for(answers)
    return setting_specs.memory_limit_mib(int(answers["workers"]), int(budget))


class MatrixExtension(Extension):
    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        environment.globals["refusal"] = refusal
        environment.globals["answer_range"] = answer_range
        environment.globals["check_command_line"] = check_command_line
        environment.globals["env_example"] = env_example
        environment.globals["settings_table"] = settings_table
        environment.globals["setting_default"] = setting_default
        environment.globals["memory_limit_mib"] = memory_limit_mib
        environment.globals["database_default_url"] = database_default_url
        environment.globals["default_served_loops"] = default_served_loops
        environment.filters["served_loops_for"] = served_loops_for
        environment.filters["slugify"] = slugify
