"""The matrix as Markdown tables, for `engines --markdown` and the docs.

Each function takes the matrix module; the project passes its own `app.core.loops`,
the docs hook the template's copy (loaded by path: nothing here imports `app`).
"""

from __future__ import annotations

from types import ModuleType


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def loop_table(loops: ModuleType) -> str:
    reasons: list[str] = []
    lines = [
        _row(["Python", "engine", *(f"`{name}`" for name in loops.LOOP_POLICIES)]),
        _row(["---"] * (2 + len(loops.LOOP_POLICIES))),
    ]
    auto = " if installed, else ".join(loops.AUTO_PREFERENCE)
    for python in loops.PYTHON_VERSIONS:
        for engine in loops.ENGINES:
            cells = [python, engine, auto]
            for name in loops.LOOPS:
                reason = loops.refusal_reason(engine, name, loops.python_version(python))
                if reason is None:
                    cells.append("yes")
                    continue
                if reason not in reasons:
                    reasons.append(reason)
                cells.append(f"refused ({reasons.index(reason) + 1})")
            lines.append(_row(cells))
    notes = [f"{number}. {reason}." for number, reason in enumerate(reasons, 1)]
    return "\n".join([*lines, "", *notes])


def parser_table(loops: ModuleType) -> str:
    lines = [
        _row(["engine", *(f"`{name}`" for name in loops.HTTP_POLICIES), "HTTP/2 (h2c)"]),
        _row(["---"] * (2 + len(loops.HTTP_POLICIES))),
    ]
    for engine in loops.ENGINES:
        cells = [engine]
        if engine == loops.PARSER_ENGINE:
            cells.append(" if installed, else ".join(loops.HTTP_AUTO_PREFERENCE))
            cells += ["yes" for _ in loops.HTTP_PARSERS]
            capable = [spec.name for spec in loops.HTTP_PARSERS.values() if spec.http2]
            cells.append(f"with {', '.join(capable)}")
        else:
            cells.append(f"{loops.GRANIAN_HTTP} (Rust)")
            cells += ["refused" for _ in loops.HTTP_PARSERS]
            cells.append("yes")
        lines.append(_row(cells))
    return "\n".join(lines)


def tables(loops: ModuleType) -> str:
    return "\n\n".join([loop_table(loops), parser_table(loops)]) + "\n"


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
