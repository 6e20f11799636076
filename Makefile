# copier-fastapi-engines: `make demo` renders a project with the defaults and serves it;
# `make test` runs the template's own suite, each capability once (under 5 minutes);
# `make test-all` the full matrix, what CI runs. They set themselves up with python3 only.

PYTHON ?= python3
VENV := .venv
DEV := $(VENV)/.installed
DEMO_DIR ?= demo

.PHONY: test test-all demo lint docs clean

$(DEV): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check uv
	$(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(VENV)/bin/python \
		-r pyproject.toml --group pyproject.toml:dev
	@touch $@

# Three test workers on two cores (pyproject.toml): most of a test waits on servers
# booting in subprocesses (docs/suite.md).
test: $(DEV)
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

test-all: $(DEV)
	FULL_MATRIX=1 $(VENV)/bin/python -m pytest $(PYTEST_ARGS)

demo: $(DEV)
	rm -rf $(DEMO_DIR)
	$(VENV)/bin/copier copy --trust --defaults --vcs-ref HEAD $(DATA) . $(DEMO_DIR)
	$(MAKE) -C $(DEMO_DIR) serve UV=$(CURDIR)/$(VENV)/bin/uv

lint: $(DEV)
	$(VENV)/bin/ruff check extensions migrations tests docs

docs: $(DEV)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .cache $(DEMO_DIR) site
