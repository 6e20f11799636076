"""Each engine of the matrix is one module of serving/engines/ that meets the contract
in serving/engines/__init__.py, and reads in one sitting."""

from __future__ import annotations

import inspect
import pickle
import pkgutil
from pathlib import Path

import pytest

from app.core import loops
from serving import engines

LONGEST = 300  # lines: an engine's whole integration, read in one sitting


def test_the_engine_modules_are_the_matrix_engines() -> None:
    found = {info.name for info in pkgutil.iter_modules(engines.__path__)}
    assert found == set(loops.ENGINES)


@pytest.mark.parametrize("engine", loops.ENGINES)
def test_an_engine_module_meets_the_contract(engine: str) -> None:
    module = engines.module(engine)
    assert engine == module.NAME
    assert list(inspect.signature(module.run).parameters) == ["settings", "loop"]
    assert isinstance(module.RELOADS_ITSELF, bool)
    # A reloader pickles `run` for its child process: it must be found by its name.
    assert pickle.loads(pickle.dumps(module.run)) is module.run


@pytest.mark.parametrize("engine", loops.ENGINES)
def test_an_engine_module_is_short(engine: str) -> None:
    """An engine too big for one module is a package of short ones (uvicorn: its
    options and run, its workers, its protocols), each read in one sitting."""
    entry = Path(engines.module(engine).__file__)
    files = sorted(entry.parent.glob("*.py")) if entry.name == "__init__.py" else [entry]
    for file in files:
        lines = file.read_text().count("\n")
        assert lines < LONGEST, f"{file.relative_to(entry.parents[2])}: {lines} lines"
