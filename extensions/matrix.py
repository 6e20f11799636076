"""Copier Jinja extension: the questions' validators, read from the project's own matrix.

The rules live in `template/app/core/loops.py`, the module the generated project runs
with; this file loads it from the template so both always agree.

A refused answer given on the command line (`--data`, `--defaults`) raises Copier's
UserMessageError, which Copier prints as one red sentence with exit code 1 and nothing
rendered; the same check asked interactively returns the sentence so that Copier
shows it and asks again.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
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


loops = load_template_module("app/core/loops.py")
setting_specs = load_template_module("app/core/setting_specs.py")


def slugify(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _name_refusal(value: Any) -> str:
    text = str(value)
    if not NAME_PATTERN.fullmatch(text) or not slugify(text):
        return (
            f"project_name {text!r} is refused: start with a letter and use only "
            "letters, digits, spaces, '-' and '_'."
        )
    return ""


def _choice_refusal(question: str, value: Any, choices: tuple[str, ...]) -> str:
    if str(value) not in choices:
        return f"{question} {value!r} is refused: choose {', '.join(choices)}."
    return ""


def _range_refusal(question: str, value: Any, low: int, high: int) -> str:
    try:
        number = int(str(value))
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        return f"{question} {value!r} is refused: give a whole number from {low} to {high}."
    return ""


VALUE_RULES: dict[str, Callable[[Any], str]] = {
    "project_name": _name_refusal,
    "python_version": lambda v: _choice_refusal("python_version", v, loops.PYTHON_VERSIONS),
    "default_engine": lambda v: _choice_refusal("default_engine", v, loops.ENGINES),
    "loop_policy": lambda v: _choice_refusal("loop_policy", v, loops.LOOP_POLICIES),
    "port": lambda v: _range_refusal("port", v, 1, 65535),
    "workers": lambda v: _range_refusal("workers", v, 1, 64),
}


def _loop_refusal(answers: dict[str, Any], loop: Any) -> str:
    python = loops.python_version(answers["python_version"])
    return loops.refusal(answers["default_engine"], str(loop), python) or ""


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
        rule = VALUE_RULES.get(question)
        reason = rule(value) if rule else ""
        if reason:
            raise UserMessageError(reason)
    return ""


@pass_context
def refusal(context: Context, question: str, value: Any) -> str:
    """The sentence refusing `value` for `question` ('' when it is fine).

    Used as a question validator and, for choice questions, as each choice's
    validator (an empty result leaves the choice selectable).
    """
    answers = dict(context.items())
    if question == "loop_policy":
        given = _given_on_command_line(context).get(question)
        if given is not None:
            reason = _loop_refusal(answers, given)
            if reason:
                raise UserMessageError(reason)
        return short_reason(_loop_refusal(answers, value))
    return VALUE_RULES[question](value)


def answers_refusal(answers: dict[str, Any]) -> str:
    """The first sentence refusing a set of answers, or ''."""
    for question, rule in VALUE_RULES.items():
        reason = rule(answers[question]) if question in answers else ""
        if reason:
            return reason
    return _loop_refusal(answers, answers["loop_policy"])


class AnswersCheck(ContextHook):
    """Refuse to render answers that arrived without a question's check.

    Answers from `--defaults` with user defaults, from an answers file or from
    pytest-copie skip the validators; this last check runs before the first file is
    written, so an impossible project is never rendered.
    """

    def hook(self, context: dict[str, Any]) -> None:
        if context.get("_copier_phase") != "render":
            return
        reason = answers_refusal(context)
        if reason:
            raise UserMessageError(reason)


@pass_context
def env_example(context: Context) -> str:
    """`.env.example`, from the settings' declaration and this project's answers."""
    return setting_specs.env_example(dict(context.items()))


@pass_context
def settings_table(context: Context) -> str:
    return setting_specs.markdown_table(dict(context.items()))


@pass_context
def setting_default(context: Context, name: str) -> str:
    """A setting's default for these answers, as the environment spells it."""
    spec = setting_specs.BY_NAME[name]
    return spec.text(spec.default_for(dict(context.items())))


class MatrixExtension(Extension):
    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        environment.globals["refusal"] = refusal
        environment.globals["check_command_line"] = check_command_line
        environment.globals["env_example"] = env_example
        environment.globals["settings_table"] = settings_table
        environment.globals["setting_default"] = setting_default
        environment.filters["slugify"] = slugify
