"""`copier update` from each earlier release to this working tree keeps the user's work."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from tests.conftest import TEMPLATE_ROOT
from tests.releases import releases_before_head

ANSWERS = {"project_name": "Update Me", "python_version": "3.12", "default_engine": "granian",
           "loop_policy": "rloop", "port": 8123, "workers": 2}
USER_SECTION = "\n## Deploying at ACME\n\nBehind the ACME load balancer, on port 9100.\n"
RENAMED = ("WEBSERVER_FORWARDED_ALLOW_IPS", "WEBSERVER_TRUSTED_PROXIES", Version("0.2.0"))
CONFLICT_MARKERS = ("<<<<<<< ", ">>>>>>> ")


def git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=user", "-c", "user.email=user@example.com", *args],
                   cwd=project, check=True, capture_output=True)


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text(errors="replace")
            for p in sorted(root.rglob("*")) if p.is_file() and ".git" not in p.parts}


@pytest.mark.parametrize("release", releases_before_head(TEMPLATE_ROOT))
def test_update_keeps_user_edits_and_applies_the_template(copie, release: str) -> None:
    old = copie.copy(extra_answers=ANSWERS, vcs_ref=release)
    assert old.exit_code == 0, old.exception
    project = old.project_dir
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-qm", f"Rendered from {release}")

    # The user's work: a README section (the template changes README too), local
    # settings in the git-ignored .env, one of them under a name later renamed.
    readme = project / "README.md"
    readme.write_text(readme.read_text() + USER_SECTION)
    git(project, "commit", "-qam", "Document our deployment")
    env = project / ".env"
    old_name, new_name, renamed_in = RENAMED
    migrated = Version(release) < renamed_in
    user_setting = f"{old_name if migrated else new_name}=10.0.0.0/8"
    env.write_text(env.read_text().replace("WEBSERVER_PORT=8123", "WEBSERVER_PORT=9100")
                   + user_setting + "\n")

    updated = copie.update(old, vcs_ref="HEAD")
    assert updated.exit_code == 0, updated.exception

    fresh = copie.copy(extra_answers=ANSWERS, vcs_ref="HEAD")
    assert fresh.exit_code == 0, fresh.exception
    got, want = files(project), files(fresh.project_dir)

    for name, text in got.items():
        assert not any(marker in text for marker in CONFLICT_MARKERS), f"conflict in {name}"
        assert not name.endswith(".rej"), name
    # Every template file is as this version renders it, the user's files aside.
    for name in set(want) - {"README.md", ".env", ".copier-answers.yml"}:
        assert got.get(name) == want[name], f"{name} differs from a fresh render"
    assert got["README.md"] == want["README.md"] + USER_SECTION
    # .env is the user's: kept, with the renamed setting carried over by the migration.
    assert "WEBSERVER_PORT=9100\n" in got[".env"]
    assert f"{new_name}=10.0.0.0/8\n" in got[".env"]
    assert f"\n{old_name}=" not in got[".env"]
    # The answers file still records every answer.
    recorded = yaml.safe_load(got[".copier-answers.yml"])
    assert {key: recorded.get(key) for key in ANSWERS} == ANSWERS
