"""The matrix as Markdown tables, for `engines --markdown` and the docs.

Each function takes the matrix module; the project passes its own `app.core.loops`,
the docs hook the template's copy (loaded by path: nothing here imports `app`). What
only the docs show (the refusals, the settings per engine, the evidence) is the docs
hook's own (docs/hooks/matrix.py).
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
    for python in loops.PYTHON_VERSIONS:
        for engine in loops.ENGINES:
            auto = " if installed, else ".join(
                loops.auto_choices(engine, loops.python_version(python)))
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


def tables(loops: ModuleType) -> str:
    return "\n\n".join([loop_table(loops), parser_table(loops)]) + "\n"
