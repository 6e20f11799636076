"""The request a benchmark sends: method, templated path, headers, body."""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit


class RouteError(ValueError):
    """A route description that cannot be sent, as one sentence."""


@dataclass(frozen=True)
class Route:
    path_template: str = "/health/"
    path_params: dict[str, str] = field(default_factory=dict)
    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    @property
    def path(self) -> str:
        """The path with `{name}` filled from path_params (each value URL-quoted)."""
        split = urlsplit(self.path_template)
        names = [name for _, name, _, _ in string.Formatter().parse(split.path) if name]
        missing = [name for name in names if name not in self.path_params]
        if missing:
            raise RouteError(
                f"the path {self.path_template!r} needs --path-param for {', '.join(missing)} "
                f"(for example --path-param {missing[0]}=42)."
            )
        unused = sorted(set(self.path_params) - set(names))
        if unused:
            raise RouteError(f"--path-param {', '.join(unused)} is not in the path "
                             f"{self.path_template!r}.")
        filled = split.path.format(**{k: quote(v, safe="") for k, v in self.path_params.items()})
        return filled + (f"?{split.query}" if split.query else "")


def parse_pairs(items: list[str], separator: str, what: str) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        name, sep, value = item.partition(separator)
        if not sep or not name.strip():
            raise RouteError(f"{what} {item!r} is not NAME{separator}VALUE.")
        pairs.append((name.strip(), value.strip()))
    return pairs
