"""Copier migration to 0.4.0: `.env` keeps only the values the user chose.

Up to 0.3.0 `.env` was rendered with every setting, the Copier answers included, and
`copier update` never touches it, so a changed answer never took effect. From 0.4.0
the answers are config.py's defaults and `.env` holds overrides only. Run before the
update, while the answers file still holds the answers `.env` was rendered from: a
value equal to what the old release wrote is the answer's and is dropped; any other
value is the user's and stays. Idempotent: a file with no such value is left as it is.

In two steps, so that an update that stops half-way (no terminal for a question, a
Ctrl-C) leaves `.env` as it was: `plan`, run before the update, keeps the answers `.env`
was made from in the project's git directory (never in the work tree, which Copier
wants clean); `apply`, run after it and after the other migrations (a renamed
setting), drops their values from `.env` as it is then. An update that stopped between
the two leaves only the kept answers, which the next update's `plan` replaces.

Usage: env_answers_to_defaults.py plan ANSWERS_FILE [ENV_FILE]
       env_answers_to_defaults.py apply NEW_ENV_TEMPLATE [ENV_FILE]
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

# What releases 0.1.0-0.3.0 wrote into .env: a fixed value, or the answer named in {}.
RENDERED = {
    "WEBSERVER_ENGINE": "{default_engine}",
    "WEBSERVER_LOOP": "{loop_policy}",
    "WEBSERVER_PORT": "{port}",
    "WEBSERVER_WORKERS": "{workers}",
    "WEBSERVER_HTTP": "auto",
    "WEBSERVER_HTTP2": "false",
    "WEBSERVER_WS_PING_INTERVAL": "0",
    "WEBSERVER_FORWARDED_ALLOW_IPS": "127.0.0.1",
    "WEBSERVER_TRUSTED_PROXIES": "127.0.0.1",
    "WEBSERVER_GRACEFUL_TIMEOUT": "30",
    "WEBSERVER_HOST": "127.0.0.1",
    "WEBSERVER_RELOAD": "false",
    "WEBSERVER_LOG_LEVEL": "info",
}
OLD_HEADER = (
    "# Local settings for `make serve` and `",
    "# .env.example lists every setting. Flags (`--engine`, `--loop`, ...) win over these.",
)
SETTING = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def answer_values(answers: dict[str, object]) -> dict[str, str]:
    return {name: value.format(**{k: str(v) for k, v in answers.items()})
            for name, value in RENDERED.items()}


def migrate(text: str, answers: dict[str, object], header: str) -> tuple[str, list[str]]:
    """The new .env text and the names dropped as the answers' own."""
    rendered = answer_values(answers)
    kept, dropped = [], []
    for line in text.splitlines():
        match = SETTING.match(line)
        if match and rendered.get(match[1]) == match[2].strip().strip("'\""):
            dropped.append(match[1])
        elif not line.startswith(OLD_HEADER):
            kept.append(line)
    if not dropped:
        return text, []
    return header + "".join(f"{line}\n" for line in kept), dropped


def kept_answers(env_file: Path) -> Path:
    """Where `plan` keeps the answers: in the project's .git directory, which Copier's
    clean-tree check and every render leave alone."""
    git_dir = Path(subprocess.run(["git", "rev-parse", "--absolute-git-dir"],
                                  cwd=env_file.parent, capture_output=True, text=True,
                                  check=True).stdout.strip())
    return git_dir / "copier-fastapi-engines" / "answers-before-update.yml"


def plan(answers_file: Path, env_file: Path) -> int:
    kept = kept_answers(env_file)
    kept.unlink(missing_ok=True)
    if env_file.exists() and answers_file.exists():
        kept.parent.mkdir(exist_ok=True)
        kept.write_text(answers_file.read_text())
    return 0


def apply(env_template: Path, env_file: Path) -> int:
    kept = kept_answers(env_file)
    if not kept.exists():
        return 0
    answers = yaml.safe_load(kept.read_text()) or {}
    if env_file.exists():
        text, dropped = migrate(env_file.read_text(), answers, env_template.read_text())
        if dropped:
            env_file.write_text(text)
            print(f"{env_file}: the values rendered from the Copier answers are dropped "
                  "(config.py holds them now, so a changed answer takes effect); yours "
                  "stay.")
    kept.unlink()  # only once .env is done: a failure leaves them for the next update
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] in (["plan"], ["apply"]) and len(argv) in (2, 3):
        step = plan if argv[0] == "plan" else apply
        return step(Path(argv[1]), Path(argv[2] if len(argv) == 3 else ".env"))
    print(f"Usage: {__doc__.strip().split('Usage: ', 1)[1]}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
