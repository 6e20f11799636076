"""Settings from the environment and `.env`, checked against the loop matrix.

The fields are declared once, in app/core/setting_specs.py; this module builds the
model from them and adds the checks that span several settings.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from dotenv import dotenv_values
from pydantic import Field, ValidationError, create_model, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.core import loops
from app.core.answers import ANSWERS, PROJECT_NAME, PROJECT_SLUG
from app.core.setting_specs import ENV_PREFIX, SETTINGS, SettingSpec

__all__ = ["ENV_PREFIX", "PROJECT_NAME", "PROJECT_SLUG", "Settings", "get_settings"]
ENV_FILE = ".env"
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
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=ENV_FILE, extra="ignore")

    @model_validator(mode="after")
    def _engine_can_honour_every_setting(self) -> Settings:
        reason = (
            loops.availability_refusal(self.engine, self.loop)
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

    @field_validator("trusted_proxies")
    @classmethod
    def _addresses_or_networks(cls, value: str) -> str:
        for item in (part.strip() for part in value.split(",")):
            if item == "*":
                continue
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(
                    f"{item!r} is not an address or network; give addresses or networks "
                    "separated by commas (127.0.0.1,10.0.0.0/8), or *"
                ) from None
        return value

    @property
    def resolved_loop(self) -> str:
        return loops.resolve(self.engine, self.loop)

    @property
    def resolved_http(self) -> str:
        return loops.resolve_http(self.engine, self.http)


class SettingsError(Exception):
    """A setting that cannot work, as one sentence for the person who set it."""


def describe(error: ValidationError) -> str:
    sentences = []
    for item in error.errors():
        message = str(item["msg"]).removeprefix("Value error, ")
        if item["loc"]:
            name = f"{ENV_PREFIX}{str(item['loc'][0]).upper()}"
            message = f"{name}={item['input']!r} is refused: {message[0].lower()}{message[1:]}."
        sentences.append(message)
    return " ".join(sentences)


def setting_names() -> list[str]:
    return [spec.env for spec in SETTINGS]


def unknown_name_refusal(name: str, source: str) -> str | None:
    """Why a WEBSERVER_* name is not a setting (renamed, or a typo), or None when it is."""
    upper = name.upper()
    known = setting_names()
    if upper in known:
        return None
    if upper in RENAMED_SETTINGS:
        new, release = RENAMED_SETTINGS[upper]
        return (
            f"{name} (in {source}) was renamed {new} in template release {release}: "
            f"set {new} instead."
        )
    # Compared without the prefix, which every name shares and would make all look alike.
    suffixes = [known_name.removeprefix(ENV_PREFIX) for known_name in known]
    close = difflib.get_close_matches(upper.removeprefix(ENV_PREFIX), suffixes, n=1)
    hint = f"did you mean {ENV_PREFIX}{close[0]}?" if close else "see .env.example."
    return f"{name} (in {source}) is not a setting of this service; {hint}"


def unknown_settings_refusal(env_file: str | Path = ENV_FILE) -> str | None:
    """A misspelled or renamed WEBSERVER_* name would be ignored silently: refuse it."""
    given = [(name, "the environment") for name in os.environ]
    if Path(env_file).is_file():
        given += [(name, str(env_file)) for name in dotenv_values(env_file)]
    for name, source in given:
        if name.upper().startswith(ENV_PREFIX):
            reason = unknown_name_refusal(name, source)
            if reason:
                return reason
    return None


def load_settings(**overrides: object) -> Settings:
    """Settings with command-line overrides on top; SettingsError when one cannot work."""
    reason = unknown_settings_refusal()
    if reason:
        raise SettingsError(reason)
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given)
    except ValidationError as error:
        raise SettingsError(describe(error)) from None


@lru_cache
def get_settings() -> Settings:
    return Settings()
