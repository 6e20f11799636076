"""Copier migration: rename a setting in the project's `.env`, keeping its value.

`.env` is the user's own file (git-ignored, never overwritten by `copier update`), so a
renamed setting must be carried over in place. Idempotent: Copier may run this more
than once, and a file without the old name is left as it is.

Usage: rename_env_setting.py OLD_NAME NEW_NAME [ENV_FILE]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def rename(text: str, old: str, new: str) -> str:
    has_new = re.search(rf"^\s*(export\s+)?{re.escape(new)}=", text, re.MULTILINE)
    pattern = re.compile(rf"^(\s*(?:export\s+)?){re.escape(old)}=", re.MULTILINE)
    if has_new:
        # The new name is already set: keep it, and leave the old line as a comment.
        return pattern.sub(rf"# {old} was renamed {new}: \g<1>{old}=", text)
    return pattern.sub(rf"\g<1>{new}=", text)


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    old, new = argv[0], argv[1]
    env_file = Path(argv[2] if len(argv) == 3 else ".env")
    if not env_file.exists():
        return 0
    text = env_file.read_text()
    renamed = rename(text, old, new)
    if renamed != text:
        env_file.write_text(renamed)
        print(f"{env_file}: {old} is now {new}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
