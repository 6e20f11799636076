"""gunicorn's logger class (its `logger_class`), its lines in the app's format."""

from __future__ import annotations

from gunicorn.glogging import Logger

from app.core.logs import JsonFormatter


class JsonLogger(Logger):
    def setup(self, cfg: object) -> None:
        super().setup(cfg)
        for handler in self.error_log.handlers:
            handler.setFormatter(JsonFormatter())


def logger_class(log_format: str) -> type[Logger]:
    return JsonLogger if log_format == "json" else Logger
