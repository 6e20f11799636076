"""TLS, terminated by the engine itself (WEBSERVER_TLS_CERTFILE, WEBSERVER_TLS_KEYFILE):
a service on one host, without a proxy in front, serves HTTPS, and HTTP/2 by ALPN.

Each engine reports a bad certificate its own way, some only when the first client
connects; here the pair is loaded once into a server context before anything starts,
and what is wrong is one sentence naming the setting, the same on every engine.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path

CERT, KEY = "WEBSERVER_TLS_CERTFILE", "WEBSERVER_TLS_KEYFILE"
# TLS 1.2's suites each engine offers (1.3's are OpenSSL's, all AEAD): forward secret and
# AEAD only, no CBC (granian offers 1.3 alone).
CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


def refusal(certfile: str, keyfile: str) -> str | None:
    """Why this certificate and key cannot serve TLS, as one sentence; None if they can
    (or if TLS is off: neither given)."""
    if not certfile and not keyfile:
        return None
    if not certfile or not keyfile:
        given, missing = (CERT, KEY) if certfile else (KEY, CERT)
        return (f"{given} is set but {missing} is not: TLS needs both the certificate "
                "and its private key (or neither, for plain HTTP).")
    for path, setting in ((certfile, CERT), (keyfile, KEY)):
        if (problem := unreadable(Path(path))) is not None:
            return f"{setting}={path}: {problem}."
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(certfile, keyfile)
    except ssl.SSLError as error:
        if "KEY_VALUES_MISMATCH" in str(error) or "key values mismatch" in str(error):
            return (f"the private key in {KEY}={keyfile} is not the key of the certificate "
                    f"in {CERT}={certfile}: give the key the certificate was issued for.")
        return (f"{CERT}={certfile} and {KEY}={keyfile} are not a PEM certificate chain and "
                f"its unencrypted PEM private key ({error.reason or error}).")
    return None


def unreadable(path: Path) -> str | None:
    if not path.exists():
        return "no such file"
    if not path.is_file():
        return "not a file"
    if not os.access(path, os.R_OK):
        return f"this process (uid {os.getuid()}) may not read it"
    return None
