"""The server's settings (WEBSERVER_*) from the environment and `.env`, checked against
the loop matrix. Your app's own settings are `AppSettings` in app/custom.py; this module
checks their names too.

The fields are declared once, in app/core/setting_specs.py; this module builds the
model from them and adds the checks that span several settings.
"""

from __future__ import annotations

import difflib
import io
import ipaddress
import os
import re
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from dotenv import dotenv_values
from dotenv.parser import parse_stream
from pydantic import (
    AliasChoices,
    AliasPath,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.core import layers, loops, tls
from app.core.answers import ANSWERS, PROJECT_NAME, PROJECT_SLUG
from app.core.setting_specs import BY_NAME, ENV_PREFIX, SettingSpec, declared

__all__ = ["ENV_PREFIX", "PROJECT_NAME", "PROJECT_SLUG", "SETTINGS", "Settings", "get_settings"]
ENV_FILE = ".env"
# Names another file of local overrides, or none when empty: the project's tests empty
# it, so a developer's `.env` never reaches them (tests/conftest.py).
ENV_FILE_VARIABLE = f"{ENV_PREFIX}ENV_FILE"
# This project's settings (the database's only with a database), and its database.
SETTINGS = declared(ANSWERS)
DATABASE = str(ANSWERS.get("database", loops.NO_DATABASE))
# Names a template release renamed (`copier update` renames them inside .env; a name
# set anywhere else, such as a container's environment, is refused with its new name).
RENAMED_SETTINGS = {
    "WEBSERVER_FORWARDED_ALLOW_IPS": ("WEBSERVER_TRUSTED_PROXIES", "0.2.0"),
}


def _field(spec: SettingSpec) -> tuple[Any, Any]:
    # Engine, loop and parser stay plain str: a wrong one gets the matrix's sentence,
    # which names what the chosen engine accepts on this Python.
    kind = Literal[spec.choices] if spec.choices else spec.kind
    return kind, Field(default=spec.default_for(ANSWERS), ge=spec.minimum, le=spec.maximum,
                       description=spec.help)


_Declared: type[BaseSettings] = create_model(  # type: ignore[call-overload]
    "_Declared", __base__=BaseSettings, **{spec.name: _field(spec) for spec in SETTINGS}
)


class Settings(_Declared):  # type: ignore[misc, valid-type]
    # The file is given where Settings are made (env_file()): WEBSERVER_ENV_FILE may name
    # another, or none.
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=None, extra="ignore")

    @model_validator(mode="after")
    def _engine_can_honour_every_setting(self) -> Settings:
        reason = (
            loops.availability_refusal(self.engine, self.loop)
            or loops.served_refusal(self.engine, self.loop, loops.names(self.served_engines),
                                    loops.names(self.served_loops))
            or loops.http_availability_refusal(self.engine, self.http, self.http2)
            or next((refusal for name in loops.FEATURES
                     if (refusal := loops.feature_refusal(self.engine, name,
                                                          getattr(self, name)))), None)
        )
        if reason:
            raise ValueError(reason)
        if self.reload and self.workers > 1:
            raise ValueError(
                f"{ENV_PREFIX}RELOAD and {ENV_PREFIX}WORKERS={self.workers} cannot be "
                "combined: the reloader runs a single worker; drop one of them."
            )
        return self

    @model_validator(mode="after")
    def _database_serves(self) -> Settings:
        if DATABASE == loops.NO_DATABASE:
            return self
        scheme = loops.DATABASES[DATABASE].scheme
        if not self.database_url.startswith(f"{scheme}://"):
            # Not the URL itself: it may hold a password.
            raise ValueError(
                f"{ENV_PREFIX}DATABASE_URL must start {scheme}:// (this project's database "
                f"is {DATABASE}, through {loops.DATABASES[DATABASE].driver}); docs/database.md.")
        reason = url_refusal(self.database_url) or loops.database_refusal(
            DATABASE, (self.resolved_loop,))
        if reason:
            raise ValueError(reason)
        return self

    @model_validator(mode="after")
    def _tls_files_serve(self) -> Settings:
        if (reason := tls.refusal(self.tls_certfile, self.tls_keyfile)) is not None:
            raise ValueError(reason)
        return self

    @model_validator(mode="after")
    def _http3_over_tls(self) -> Settings:
        if self.http3 and not self.tls_certfile:
            raise ValueError(
                f"{ENV_PREFIX}HTTP3=true needs TLS: QUIC is always encrypted, so set "
                f"{ENV_PREFIX}TLS_CERTFILE and {ENV_PREFIX}TLS_KEYFILE, or set "
                f"{ENV_PREFIX}HTTP3=false."
            )
        return self

    @property
    def scheme(self) -> str:
        return "https" if self.tls_certfile else "http"

    @model_validator(mode="after")
    def _metrics_have_a_port_of_their_own(self) -> Settings:
        if self.metrics == "port" and self.metrics_port == self.port:
            raise ValueError(
                f"{ENV_PREFIX}METRICS_PORT={self.metrics_port} is also the app's port: give "
                f"the metrics another port, or serve them at /metrics on the app's port "
                f"with {ENV_PREFIX}METRICS=path."
            )
        return self

    @field_validator("trusted_proxies")
    @classmethod
    def _addresses_or_networks(cls, value: str) -> str:
        """Only what the proxy-headers middleware (app/middleware/forwarded.py) honours."""
        items = [part.strip() for part in value.split(",")]
        if items == ["*"]:
            return "*"
        for item in items:
            if item == "*":
                raise ValueError(
                    "* trusts every address and must stand alone: give * by itself, or "
                    "addresses and networks without it"
                )
            try:
                # As the middleware reads them: a network has a /, an address has none.
                if "/" in item:
                    ipaddress.ip_network(item)
                else:
                    ipaddress.ip_address(item)
            except ValueError:
                raise ValueError(_proxy_refusal(item)) from None
        return ",".join(items)  # the form the middleware reads, spaces dropped

    @field_validator("root_path")
    @classmethod
    def _a_path_prefix(cls, value: str) -> str:
        prefix = value.strip().rstrip("/")
        if prefix and not is_path_prefix(prefix):
            raise ValueError(
                "give a path of plain segments (letters, digits, . _ ~ -), such as /api "
                "or /team/api, or nothing"
            )
        return prefix

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        """What a browser sends in Origin: scheme://host[:port], no path."""
        items = [part.strip().rstrip("/") for part in value.split(",") if part.strip()]
        if items == ["*"]:
            return "*"
        for item in items:
            scheme, _, rest = item.partition("://")
            if item == "*" or scheme not in ("http", "https") or not rest or "/" in rest:
                raise ValueError(
                    f"{item!r} is not an origin: give origins as a browser sends them "
                    "(https://app.example.com, http://localhost:3000) separated by "
                    "commas, or * by itself"
                )
        return ",".join(items)

    @property
    def resolved_loop(self) -> str:
        served = loops.database_loops(DATABASE, loops.names(self.served_loops))
        return loops.resolve(self.engine, self.loop, served=served)

    @property
    def resolved_http(self) -> str:
        return loops.resolve_http(self.engine, self.http)


def url_refusal(database_url: str) -> str | None:
    """Why a database URL cannot serve the workers (one sentence, never the URL), or None."""
    from sqlalchemy.engine import make_url  # here: only a project with a database has it

    try:
        address = make_url(database_url)
    except ValueError:
        return (f"{ENV_PREFIX}DATABASE_URL is not a URL SQLAlchemy reads: write it as "
                "postgresql+asyncpg://user:password@host:port/name or "
                "sqlite+aiosqlite:///path (docs/database.md).")
    if address.get_backend_name() == "sqlite" and address.database in (None, "", ":memory:"):
        return (f"{ENV_PREFIX}DATABASE_URL names an in-memory SQLite database, which each "
                "connection of each worker would see empty: give a file "
                "(sqlite+aiosqlite:///data/app.db).")
    return None


PATH_PREFIX = re.compile(r"(/[A-Za-z0-9._~-]+)+")


def is_path_prefix(prefix: str) -> bool:
    """`/api`, `/team/api`: what WEBSERVER_ROOT_PATH and X-Forwarded-Prefix may be.
    Plain segments only: FastAPI writes the prefix unescaped into the docs page, and a
    leading // would read as another host in a Location header."""
    return PATH_PREFIX.fullmatch(prefix) is not None


def _proxy_refusal(item: str) -> str:
    try:
        network = ipaddress.ip_network(item, strict=False)
    except ValueError:
        return (f"{item!r} is not an address or network; give addresses or networks "
                "separated by commas (127.0.0.1,10.0.0.0/8), or *")
    return (f"{item!r} has host bits set, so it would match no address: write {network}")


class SettingsError(Exception):
    """A setting that cannot work, as one sentence for the person who set it."""


# Errors a field's declaration decides (a value that does not parse, is out of bounds or
# not a choice): worded from the declaration, as the Copier question words the answer.
# Others (value_error) carry the sentence of the check that raised them.
_DECLARED_ERRORS = ("_parsing", "_type", "greater_than", "less_than", "literal_error",
                    "int_from_float", "finite_number")


def describe(error: ValidationError, prefix: str = ENV_PREFIX,
             flags: frozenset[str] = frozenset()) -> str:
    """One sentence per error; a value given by a flag (in `flags`) is named as its flag."""
    sentences = []
    for item in error.errors():
        message = str(item["msg"]).removeprefix("Value error, ")
        if item["loc"]:
            spec = BY_NAME.get(str(item["loc"][0])) if prefix == ENV_PREFIX else None
            if spec and spec.wanted() and any(part in item["type"] for part in _DECLARED_ERRORS):
                message = spec.wanted()
            name = f"{prefix}{str(item['loc'][0]).upper()}"
            if item["type"] == "missing":  # its input is every value read: never shown
                sentences.append(f"{name} is required: set it in the environment or .env.")
                continue
            given = (f"{spec.option} {item['input']}" if spec and spec.name in flags
                     else f"{name}={item['input']!r}")
            message = f"{given} is refused: {message[0].lower()}{message[1:]}."
        sentences.append(message)
    return " ".join(sentences)


def setting_names() -> list[str]:
    return [spec.env for spec in SETTINGS]


def env_file() -> str | None:
    """The file of local overrides: `.env`, another WEBSERVER_ENV_FILE names, or None."""
    return os.environ.get(ENV_FILE_VARIABLE, ENV_FILE) or None


@dataclass(frozen=True)
class _Prefix:
    """One family of settings read from the environment and `.env`."""

    prefix: str
    names: tuple[str, ...]  # every name it reads, upper case
    nested: str | None  # pydantic-settings' env_nested_delimiter, if any
    elsewhere: str  # where to look when no known name is close
    # An unknown name close to none of its names: refused (the server's, whose every
    # name is known), or only noted (the app's: a platform may inject APP_ENV).
    strict: bool = True


def _declared_app_settings() -> type[BaseSettings] | None:
    return layers.declared("AppSettings")  # when asked: custom.py may import this module


def _env_prefix(settings: type[BaseSettings]) -> str:
    return str(settings.model_config.get("env_prefix") or "").upper()


def _app_prefix() -> _Prefix | None:
    """The user's APP_ settings: AppSettings in app/custom.py, which the template renders
    once and never rewrites, so its fields (and even its prefix) are read from it."""
    app_settings = _declared_app_settings()
    if app_settings is None:
        return None
    config = app_settings.model_config
    prefix = _env_prefix(app_settings)
    if not prefix or prefix.startswith(ENV_PREFIX) or ENV_PREFIX.startswith(prefix):
        # No prefix would claim every variable, and one overlapping WEBSERVER_ the server's.
        return None
    names: list[str] = []
    for name, field in app_settings.model_fields.items():
        alias = field.validation_alias or field.alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias] if alias else []
        # An alias is read as it is spelt, without the prefix.
        names += [str(choice.path[0] if isinstance(choice, AliasPath) else choice).upper()
                  for choice in choices] or [f"{prefix}{name.upper()}"]
    return _Prefix(prefix, tuple(names), config.get("env_nested_delimiter"),
                   "declare it on AppSettings in app/custom.py", strict=False)


def _prefixes() -> list[_Prefix]:
    ours = _Prefix(ENV_PREFIX, (*setting_names(), ENV_FILE_VARIABLE), None,
                   "see .env.example")
    app = _app_prefix()
    return [ours, app] if app else [ours]


def unknown_name_refusal(name: str, source: str, family: _Prefix | None = None, *,
                         guessed_only: bool = False) -> str | None:
    """Why a name with a settings prefix is not a setting (renamed, or a typo), or None;
    with `guessed_only`, None also when it was neither renamed nor resembles a name."""
    family = family or _prefixes()[0]
    upper = name.upper()
    if family.nested and family.nested.upper() in upper:
        upper = upper.split(family.nested.upper(), 1)[0]  # APP_DB__HOST is field APP_DB
    if upper in family.names:
        return None
    if upper in RENAMED_SETTINGS:
        new, release = RENAMED_SETTINGS[upper]
        return (
            f"{name} (in {source}) was renamed {new} in template release {release}: "
            f"set {new} instead."
        )
    # Compared without the prefix, which every name shares and would make all look alike.
    suffixes = {known.removeprefix(family.prefix): known for known in family.names}
    close = difflib.get_close_matches(upper.removeprefix(family.prefix), suffixes, n=1)
    if guessed_only and not close:
        return None
    hint = f"did you mean {suffixes[close[0]]}?" if close else f"{family.elsewhere}."
    return f"{name} (in {source}) is not a setting of this service; {hint}"


def unknown_settings(env_file: str | Path | None = ENV_FILE) -> tuple[str | None, list[str]]:
    """A misspelled or renamed WEBSERVER_* or APP_* name would be ignored silently:
    (the sentence refusing the first one, the notes on APP_* names that resemble none
    of AppSettings' and are ignored)."""
    given = [(name, "the environment") for name in os.environ]
    if env_file and Path(env_file).is_file():
        given += [(name, str(env_file)) for name in dotenv_values(env_file)]
    families = _prefixes()
    notes = []
    for name, source in given:
        for family in families:
            if name.upper().startswith(family.prefix):
                reason = unknown_name_refusal(name, source, family,
                                              guessed_only=not family.strict)
                if reason:
                    return reason, notes
                if unknown_name_refusal(name, source, family):
                    notes.append(f"{name} (in {source}) is not a setting of this service "
                                 f"and is ignored; to use it, {family.elsewhere}")
    return None, notes


def unknown_settings_refusal(env_file: str | Path | None = ENV_FILE) -> str | None:
    return unknown_settings(env_file)[0]


def app_settings_refusal() -> str | None:
    """A value of yours (AppSettings in app/custom.py) that does not parse, said before
    anything starts, as the server's are."""
    app_settings = _declared_app_settings()
    if app_settings is None:
        return None
    try:
        app_settings()
    except ValidationError as error:
        return describe(error, _env_prefix(app_settings))
    return None


_NOT_REGULAR = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
                (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))


def env_file_refusal(env_file: str | Path | None = ENV_FILE) -> str | None:
    """Why `.env` cannot be read as settings, or None (also when there is none).

    python-dotenv and pydantic-settings pass over a `.env` that is a directory, a
    broken link or a pipe, skip each line they cannot parse with a warning, and
    end in a traceback on one that is not UTF-8 or not readable: a setting given
    there would be lost, or the start a page of traceback. This reads the file once,
    changes nothing, and says what is wrong with it in one sentence.
    """
    if not env_file:
        return None
    path = Path(env_file)
    if not os.path.lexists(path):
        return None
    name = os.path.abspath(path)
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            return (f"{name} is a directory, not a settings file: remove it, or put the "
                    "settings in a file of that name.")
        kind = next((kind for test, kind in _NOT_REGULAR if test(mode)), None)
        if kind:
            return (f"{name} is {kind}, not a settings file: remove it, or put the "
                    "settings in a file of that name.")
        data = path.read_bytes()
    except FileNotFoundError:
        return (f"{name} is a symbolic link to {os.readlink(path)}, which does not exist: "
                "fix the link or remove it.")
    except OSError as error:
        return (f"{name} cannot be read ({error.strerror or error}): let this process "
                "read it, or remove it.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        return (f"{name} is not UTF-8 text (line {line} holds the byte "
                f"0x{data[error.start]:02x}): save it as UTF-8.")
    for binding in parse_stream(io.StringIO(text)):
        if binding.error:
            return (f"line {binding.original.line} of {name} cannot be parsed as "
                    "NAME=value: fix it (quote a value holding spaces, # or quotes) or "
                    "comment it out with #.")
    return None


def load_settings(**overrides: object) -> Settings:
    """Settings with command-line overrides on top; SettingsError when one cannot work."""
    local = env_file()
    named = os.environ.get(ENV_FILE_VARIABLE)
    if named and not os.path.lexists(named):
        raise SettingsError(f"{ENV_FILE_VARIABLE}={named} names no file: create it, or unset "
                            f"{ENV_FILE_VARIABLE} to read .env (empty: no file).")
    reason = (env_file_refusal(local) or unknown_settings_refusal(local)
              or app_settings_refusal())
    if reason:
        raise SettingsError(reason)
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given, _env_file=local)
    except ValidationError as error:
        raise SettingsError(describe(error, flags=frozenset(given))) from None


def overridden_refusals(**overrides: object) -> list[str]:
    """Values of `.env` or the environment that would be refused, where a flag replaced
    them for this run: the next run without the flag would stop on them."""
    given = {key for key, value in overrides.items() if value is not None}
    try:
        Settings(_env_file=env_file())
    except ValidationError as error:
        return [f"{describe_one(item)} (its flag replaced it for this run)"
                for item in error.errors()
                if item["loc"] and item["loc"][0] in given
                and any(part in item["type"] for part in _DECLARED_ERRORS)]
    return []


def describe_one(item: Any) -> str:
    spec = BY_NAME[str(item["loc"][0])]
    return f"{spec.env}={item['input']!r} is refused: {spec.wanted() or item['msg']}"


class _Served(BaseSettings):
    """What the project serves, read alone: the bench needs it whatever else is set."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=None, extra="ignore")
    served_engines: str = str(BY_NAME["served_engines"].default_for(ANSWERS))
    served_loops: str = str(BY_NAME["served_loops"].default_for(ANSWERS))


def served() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The engines and loops this project serves (its answers, .env, the environment),
    less the loops its database's driver cannot run."""
    values = _Served(_env_file=env_file())
    return (loops.names(values.served_engines),
            loops.database_loops(DATABASE, loops.names(values.served_loops)))


@lru_cache
def get_settings() -> Settings:
    return Settings(_env_file=env_file())
