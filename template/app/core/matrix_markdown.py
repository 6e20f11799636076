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
    for engine, spec in loops.ENGINE_SPECS.items():
        auto = (" if installed, else ".join(spec.http_auto) if spec.parser_choice
                else f"{spec.own_parser} (its own)")
        cells = [engine, auto, *("yes" if name in spec.parsers else "refused"
                                 for name in loops.HTTP_PARSERS)]
        capable = [name for name in spec.parsers if loops.HTTP_PARSERS[name].http2]
        cells.append("yes" if spec.http2_any_parser else f"with {', '.join(capable)}")
        lines.append(_row(cells))
    return "\n".join(lines)


def evidence(loops: ModuleType) -> str:
    """Each engine x loop pair, its verdict, and what was run or seen to decide it."""
    lines = [_row(["engine", "loop", "verdict", "evidence"]), _row(["---"] * 4)]
    for engine in loops.ENGINES:
        for name, spec in loops.LOOPS.items():
            if engine in spec.engine_values:
                newer = (f" (Python {loops.version_text(spec.min_python)}+)"
                         if spec.min_python > loops.python_version(loops.PYTHON_VERSIONS[0])
                         else "")
                lines.append(_row([engine, name, f"accepted{newer}", spec.verified[engine]]))
            else:
                lines.append(_row([engine, name, "refused", spec.refused_because[engine]]))
    return "\n".join(lines) + "\n"


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
