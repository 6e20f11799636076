"""Hypercorn's configuration for one worker, from the settings declaration."""

from __future__ import annotations

from hypercorn.config import Config

from app.core import logs, tls
from app.core.settings import Settings

WS_MAX_MESSAGE_SIZE = 16 * 1024 * 1024  # Hypercorn's default, kept for 0


def config(settings: Settings) -> Config:
    """Hypercorn's configuration for one worker, by Hypercorn's names; the listeners
    are the supervisor's (`fd://`), set by the worker."""
    served = Config()
    served.backlog = settings.backlog
    # Its idle timer runs from the connection's start (or last answer) until a head is
    # complete, so it is the head timeout too (measured): one timer, the larger.
    served.keep_alive_timeout = max(settings.keepalive_timeout, settings.header_timeout)
    served.graceful_timeout = settings.graceful_timeout
    served.h11_max_incomplete_size = settings.max_header_size
    served.h2_max_header_list_size = settings.max_header_size
    served.websocket_max_message_size = settings.ws_max_message_size or WS_MAX_MESSAGE_SIZE
    served.websocket_ping_interval = settings.ws_ping_interval or None
    served.alpn_protocols = ["h2", "http/1.1"] if settings.http2 else ["http/1.1"]
    served.accesslog = None  # the app's own access log, the same on every engine
    served.errorlog = logs.hypercorn_error_log(settings.log_format, settings.log_level)
    served.loglevel = settings.log_level.upper()
    if settings.tls_certfile:  # checked by the settings (app/core/tls.py)
        served.certfile, served.keyfile = settings.tls_certfile, settings.tls_keyfile
        served.ciphers = tls.CIPHERS
    return served
