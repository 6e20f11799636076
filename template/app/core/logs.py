"""The app's log records as text or JSON (WEBSERVER_LOG_FORMAT), with the request's ids.

Every record logged while a request is answered carries its request id (the
X-Request-ID the response carries) and, when traces are on, its trace id: the
middleware that decides them sets them here, in context variables, which each
engine keeps per request (each request runs in its own asyncio task). The engines'
own lines, and the launcher's, take the same shape (serving/launcher.py), on the same
stream: stderr. The access log is not a log record; it has its own format and stream
(WEBSERVER_ACCESS_LOG, stdout).
"""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime

REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
TRACE_ID: ContextVar[str | None] = ContextVar("trace_id", default=None)
TEXT_FORMAT = "[%(levelname)s] %(name)s: %(message)s"
HYPERCORN_TEXT_FORMAT = "[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s"  # its own


def _ids() -> dict[str, str]:
    ids = {}
    if (request_id := REQUEST_ID.get()) is not None:
        ids["request_id"] = request_id
    if (trace_id := TRACE_ID.get()) is not None:
        ids["trace_id"] = trace_id
    return ids


class TextFormatter(logging.Formatter):
    """`[LEVEL] logger: message`, then ` request_id=... trace_id=...` within a request."""

    def __init__(self, fmt: str | None = TEXT_FORMAT, *args: object, **kwargs: object) -> None:
        super().__init__(fmt or TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        ids = _ids()
        return line + "".join(f" {name}={value}" for name, value in ids.items())


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC), level, logger, message, the request's ids
    when there are, and the traceback as `exception`."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__()

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_ids(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # ASCII, as the JSON access log: no line or paragraph separator (U+2028) a
        # line-splitting reader would cut the record at.
        return json.dumps(entry, default=str)


FORMATTERS: dict[str, type[logging.Formatter]] = {"text": TextFormatter, "json": JsonFormatter}


def formatter(log_format: str) -> logging.Formatter:
    return FORMATTERS[log_format]()


def formatter_path(log_format: str) -> str:
    """The formatter as logging.config names a class (the engines' dictConfig)."""
    chosen = FORMATTERS[log_format]
    return f"{chosen.__module__}.{chosen.__qualname__}"


def announce(line: str, log_format: str, logger: str = "app.server",
             level: int = logging.INFO) -> None:
    """A line of the launcher's own, where no logging of its own is set up."""
    if log_format == "json":
        record = logging.LogRecord(logger, level, __file__, 0, line, None, None)
        line = JsonFormatter().format(record)
    print(line, file=sys.stderr, flush=True)


def engine_formatters(names: tuple[str, ...], log_format: str) -> dict[str, object]:
    """What to merge into an engine's logging dictConfig for its lines to take the
    format: for `json`, each of its formatters replaced by ours; for `text`, nothing
    (the engine's own look)."""
    if log_format != "json":
        return {}
    return {"formatters": {name: {"()": formatter_path(log_format)} for name in names}}


def uvicorn_json_config() -> dict[str, object]:
    """uvicorn's documented loggers (`uvicorn`, `uvicorn.error`, `uvicorn.access`) on
    its streams, as its default dictConfig has them, in the app's JSON format."""
    def handler(stream: str) -> dict[str, str]:
        return {"formatter": "json", "class": "logging.StreamHandler", "stream": stream}

    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": formatter_path("json")}},
        "handlers": {"default": handler("ext://sys.stderr"),
                     "access": handler("ext://sys.stdout")},
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        },
    }


def hypercorn_error_log(log_format: str, log_level: str) -> logging.Logger:
    """Hypercorn's `errorlog`: its logger (`hypercorn.error`) on stderr, in its own look
    for `text` and in the app's format for `json`; not also passed to the app's."""
    logger = logging.getLogger("hypercorn.error")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(
        HYPERCORN_TEXT_FORMAT, datefmt="%Y-%m-%d %H:%M:%S %z"))
    logger.handlers = [handler]
    logger.setLevel(log_level.upper())
    logger.propagate = False
    return logger

