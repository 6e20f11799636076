"""The CI a project inherits passes a supply-chain audit, and so does the template's own.

zizmor (offline, no config file, ignore comments not honoured) finds nothing in the
template's workflows nor in a rendered project's workflows and Dependabot config:
actions pinned to commits, no default token permissions, no persisted credentials, a
Dependabot cooldown. Dependabot's config validates and gives each line one owner (the
template's action pins and the image's Python are `copier update`'s). The audit job's
exact commands collect a real lock (a dry run: the advisory service is not asked).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import DEFAULT_PYTHON, TEMPLATE_ROOT, require_interpreter

BIN = Path(sys.executable).parent
TEMPLATE_WORKFLOWS = TEMPLATE_ROOT / ".github" / "workflows"
RENDERED_WORKFLOWS = {"ci.yml", "audit.yml", "template-update.yml", "upstream.yml"}
ECOSYSTEMS = {"uv", "github-actions", "docker"}
MIN_COOLDOWN_DAYS = 7
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<action>[^@\s]+)@(?P<ref>\S+)(?P<comment>.*)$")
PIN = re.compile(r"[0-9a-f]{40}")
VERSION_COMMENT = re.compile(r"\s+# (v\d+(?:\.\d+){0,2})\s*")


@pytest.fixture(scope="module")
def project(copie_session) -> Path:
    result = copie_session.copy(extra_answers={})
    assert result.exit_code == 0, result.exception
    return result.project_dir


def zizmor(*inputs: Path) -> list[dict]:
    """zizmor's findings (its JSON), offline, with no config and no ignore comments:
    silencing a finding is a change to this test, not a comment in a workflow."""
    result = subprocess.run(
        [str(BIN / "zizmor"), "--offline", "--no-config", "--no-ignores", "--no-progress",
         "--format", "json", *map(str, inputs)],
        capture_output=True, text=True, timeout=120,
    )
    # 0: no finding; 10-14: findings (by highest severity); anything else: zizmor failed.
    assert result.returncode == 0 or 10 <= result.returncode <= 14, result.stderr
    return json.loads(result.stdout)


def describe(finding: dict) -> str:
    location = finding["locations"][0]
    path = next(iter(location["symbolic"]["key"].values()))["verbatim_path"]
    row = location["concrete"]["location"]["start_point"]["row"] + 1
    severity = finding["determinations"]["severity"]
    return (f"{path}:{row}: {finding['ident']} ({severity}): {finding['desc']}: "
            f"{location['symbolic'].get('annotation', '')} [{location['concrete']['feature']}]")


def assert_no_findings(*inputs: Path) -> None:
    findings = zizmor(*inputs)
    if findings:
        pytest.fail("zizmor findings:\n" + "\n".join(map(describe, findings)), pytrace=False)


def pins(workflow: Path) -> list[tuple[str, str, str]]:
    """(action, ref, trailing comment) of each `uses:` line."""
    return [(m["action"], m["ref"], m["comment"])
            for line in workflow.read_text().splitlines() if (m := USES.match(line))]


def all_workflows(project: Path) -> list[Path]:
    return [*TEMPLATE_WORKFLOWS.glob("*.yml"), *(project / ".github/workflows").glob("*")]


def dependabot_updates(project: Path) -> dict[str, dict]:
    config = yaml.safe_load((project / ".github" / "dependabot.yml").read_text())
    return {update["package-ecosystem"]: update for update in config["updates"]}


def ignored(update: dict) -> set[str]:
    return {rule["dependency-name"] for rule in update.get("ignore", [])}


def test_template_workflows_have_no_zizmor_findings() -> None:
    assert list(TEMPLATE_WORKFLOWS.glob("*.yml"))
    assert_no_findings(TEMPLATE_WORKFLOWS)


def test_rendered_workflows_and_dependabot_have_no_zizmor_findings(project: Path) -> None:
    github = project / ".github"
    assert {p.name for p in (github / "workflows").iterdir()} == RENDERED_WORKFLOWS
    assert (github / "dependabot.yml").is_file()
    assert_no_findings(github)  # collects the workflows and dependabot.yml


def test_zizmor_reports_an_unpinned_action(project: Path, tmp_path: Path) -> None:
    """The check above is live: the rendered CI with one tag reference fails it."""
    ci = (project / ".github/workflows/ci.yml").read_text()
    unpinned = re.sub(r"actions/checkout@[0-9a-f]{40}", "actions/checkout@v7", ci, count=1)
    assert unpinned != ci
    (tmp_path / "ci.yml").write_text(unpinned)
    assert [f["ident"] for f in zizmor(tmp_path / "ci.yml")] == ["unpinned-uses"]


def test_every_action_is_one_commit_with_its_version(project: Path) -> None:
    """Each action: a 40-hex commit, the tag in a comment, the same pin everywhere,
    and that pin in docs/supply-chain.md's table."""
    seen: dict[str, set[tuple[str, str]]] = {}
    for workflow in all_workflows(project):
        for action, ref, comment in pins(workflow):
            version = VERSION_COMMENT.fullmatch(comment)
            assert PIN.fullmatch(ref) and version, f"{workflow.name}: {action}@{ref}{comment}"
            seen.setdefault(action, set()).add((ref, version[1]))
    assert {"actions/checkout", "astral-sh/setup-uv", "actions/setup-python"} <= set(seen)
    assert {a: p for a, p in seen.items() if len(p) > 1} == {}, "one pin per action"
    docs = (TEMPLATE_ROOT / "docs" / "supply-chain.md").read_text()
    for action, ((commit, version),) in seen.items():
        assert f"| `{action}` | {version} | `{commit}` |" in docs, "docs/supply-chain.md pins"


def test_workflows_validate_against_the_github_schema(project: Path) -> None:
    result = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
         *map(str, all_workflows(project))],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dependabot_config(project: Path) -> None:
    config_file = project / ".github" / "dependabot.yml"
    result = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.dependabot",
         str(config_file)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr

    updates = dependabot_updates(project)
    assert set(updates) == ECOSYSTEMS
    for ecosystem, update in updates.items():
        assert update["directory"] == "/", ecosystem
        assert update["schedule"]["interval"] == "weekly", ecosystem
        assert update["cooldown"]["default-days"] >= MIN_COOLDOWN_DAYS, ecosystem
        grouped = [g.get("update-types") for g in update["groups"].values()]
        assert ["minor", "patch"] in grouped, ecosystem
    # Dependabot owns uv.lock only; pyproject.toml's lines are the template's.
    assert updates["uv"]["versioning-strategy"] == "lockfile-only"


def test_dependabot_leaves_the_template_owned_versions_to_copier_update(project: Path) -> None:
    """Dependabot skips exactly the actions the template's workflows pin (its releases
    bump them) and the Python of the image (the python_version answer)."""
    updates = dependabot_updates(project)
    template_actions = {action for workflow in (project / ".github/workflows").glob("*")
                        for action, _, _ in pins(workflow)}
    assert ignored(updates["github-actions"]) == template_actions

    images = re.findall(r"^FROM\s+(\S+)", (project / "Dockerfile").read_text(), re.MULTILINE)
    assert set(images) == {f"python:{DEFAULT_PYTHON}-slim"}
    assert ignored(updates["docker"]) == {"python"}
    (python_rule,) = updates["docker"]["ignore"]
    assert set(python_rule["update-types"]) == {"version-update:semver-major",
                                                "version-update:semver-minor"}


def test_ci_installs_the_committed_lock(project: Path) -> None:
    ci = yaml.safe_load((project / ".github/workflows/ci.yml").read_text())
    runs = [step.get("run", "") for step in ci["jobs"]["test"]["steps"]]
    assert "uv sync --locked" in runs


def test_audit_job_runs_on_a_schedule_and_on_dependency_changes(project: Path) -> None:
    audit = yaml.safe_load((project / ".github/workflows/audit.yml").read_text())
    triggers = audit[True]  # YAML 1.1 reads the key `on` as true
    assert triggers["schedule"]
    for event in ("push", "pull_request"):
        assert {"uv.lock", "pyproject.toml"} <= set(triggers[event]["paths"]), event


def test_audit_commands_collect_the_locked_requirements(project: Path) -> None:
    """The audit step's own script, run on a locked project with `--dry-run` appended:
    uv's and pip-audit's flags are real and every locked package is collected (the
    advisory lookup itself needs PyPI's JSON API or OSV, which a dry run skips)."""
    interpreter = require_interpreter(DEFAULT_PYTHON)
    if interpreter.root_runner is not None:
        pytest.skip(f"Python {DEFAULT_PYTHON} runs inside a root here; uv runs on the host")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
           "UV_PYTHON": interpreter.executable, "UV_PYTHON_DOWNLOADS": "never",
           "RUNNER_TEMP": str(project)}
    subprocess.run([str(BIN / "uv"), "lock", "--quiet"], cwd=project, env=env, check=True,
                   timeout=300)
    audit = yaml.safe_load((project / ".github/workflows/audit.yml").read_text())
    (script,) = [step["run"] for step in audit["jobs"]["pip-audit"]["steps"]
                 if step.get("name") == "pip-audit"]
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script.rstrip() + " --dry-run"],
                            cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    collected = re.search(r"would have audited (\d+) packages", result.stderr)
    locked = [line for line in (project / "requirements.txt").read_text().splitlines()
              if re.match(r"[A-Za-z0-9]", line)]
    assert collected, result.stderr
    # Markers leave out what this Python would not install (colorama on Windows).
    assert len(locked) - 2 <= int(collected[1]) <= len(locked), (collected[1], locked)


def test_the_template_bumps_its_own_and_its_rendered_pins_together() -> None:
    """The template repository's Dependabot covers the action pins of its CI and of the
    workflows it renders in one grouped update, with the same cooldown."""
    config_file = TEMPLATE_ROOT / ".github" / "dependabot.yml"
    result = subprocess.run(
        [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.dependabot",
         str(config_file)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (update,) = yaml.safe_load(config_file.read_text())["updates"]
    assert update["package-ecosystem"] == "github-actions"
    assert set(update["directories"]) == {"/", "/template"}
    assert update["cooldown"]["default-days"] >= MIN_COOLDOWN_DAYS
    assert [group["patterns"] for group in update["groups"].values()] == [["*"]]
