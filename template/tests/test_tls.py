"""TLS on every engine (app/core/tls.py): HTTPS with a certificate the test makes, HTTP/2
chosen by ALPN where the engine offers it, and one sentence for a pair that cannot serve."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import subprocess
import sys

import httpx
import pytest
import trustme

from app.core import tls
from tests import served
from tests.request_set import loop_for
from tests.server_process import running_server, trusting

# The parser each engine needs for HTTP/2 (uvicorn: zttp's; the others: their own).
HTTP2 = {"uvicorn": ["--http2", "--http", "zttp"], "granian": ["--http2"],
         "gunicorn": ["--http2"], "hypercorn": ["--http2"]}


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A certificate authority of the test's own, and a server certificate it issued for
    127.0.0.1, as files."""
    where = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "localhost")
    files = {"ca": where / "ca.pem", "cert": where / "cert.pem", "key": where / "key.pem",
             "other_key": where / "other-key.pem"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    for blob in issued.cert_chain_pems:
        blob.write_to_path(str(files["cert"]), append=True)
    issued.private_key_pem.write_to_path(str(files["key"]))
    trustme.CA().issue_cert("127.0.0.1").private_key_pem.write_to_path(str(files["other_key"]))
    return {name: str(path) for name, path in files.items()}


def tls_env(authority: dict[str, str]) -> dict[str, str]:
    return {"WEBSERVER_TLS_CERTFILE": authority["cert"],
            "WEBSERVER_TLS_KEYFILE": authority["key"], "WEBSERVER_HEALTH_DETAIL": "full"}


def negotiated(url: str, ca_file: str) -> str | None:
    """The protocol ALPN chose, offering h2 and http/1.1 as a browser does."""
    host, port = url.removeprefix("https://").split(":")
    context = trusting(ca_file)
    context.set_alpn_protocols(["h2", "http/1.1"])
    with socket.create_connection((host, int(port)), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname=host) as wrapped:
        return wrapped.selected_alpn_protocol()


CBC_ONLY = "HIGH:!AESGCM:!CHACHA20:!AESCCM:!ARIA:!aNULL"
AEAD = "ECDHE+AESGCM"


def tls12_cipher(url: str, ca_file: str, ciphers: str) -> str | None:
    """The suite a TLS 1.2 client offering only `ciphers` gets, or None when the
    handshake fails."""
    host, port = url.removeprefix("https://").split(":")
    context = trusting(ca_file)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(ciphers)
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        try:
            with context.wrap_socket(raw, server_hostname=host) as wrapped:
                return wrapped.cipher()[0]
        except (ssl.SSLError, ConnectionError):
            return None


@pytest.mark.parametrize("http2", [False, True], ids=["http1", "http2"])
@pytest.mark.parametrize("engine", served.ENGINES)
def test_every_engine_serves_https(engine: str, http2: bool,
                                   authority: dict[str, str]) -> None:
    args = ["--engine", engine, "--loop", loop_for(engine), *(HTTP2[engine] if http2 else [])]
    with running_server(args, env=tls_env(authority), https_ca=authority["ca"]) as server:
        assert server.url.startswith("https://")
        chosen = negotiated(server.url, authority["ca"])
        with httpx.Client(verify=trusting(authority["ca"]), http2=http2) as client:
            answer = client.get(f"{server.url}/health/detailed")
        output = server.output()
        # The same client offering AEAD suites is served (granian: TLS 1.3 alone), so a
        # CBC refusal is the suites', not the certificate's or the version's.
        cbc, aead = (None, None) if http2 else (
            tls12_cipher(server.url, authority["ca"], CBC_ONLY),
            tls12_cipher(server.url, authority["ca"], AEAD))
    print(f"{engine}, HTTP/2 {'on' if http2 else 'off'}: ALPN {chosen!r}, "
          f"{answer.http_version}, scheme {answer.json().get('scheme')}")
    assert answer.status_code == 200, output[-2000:]
    assert "on https://127.0.0.1:" in output
    assert answer.headers["strict-transport-security"] == "max-age=31536000"
    if http2:
        assert chosen == "h2" and answer.http_version == "HTTP/2", (chosen, answer.http_version)
    else:
        assert chosen in (None, "http/1.1") and answer.http_version == "HTTP/1.1", chosen
        assert cbc is None, f"a CBC suite was accepted: {cbc}"
        assert (aead is None) == (engine == "granian"), aead


@pytest.mark.parametrize("engine", served.ENGINES)
def test_plain_http_to_a_tls_port_is_not_served(engine: str, authority: dict[str, str]) -> None:
    with running_server(["--engine", engine], env=tls_env(authority),
                        https_ca=authority["ca"]) as server:
        try:
            status = httpx.get(server.url.replace("https://", "http://") + "/health/",
                               timeout=5).status_code
        except httpx.HTTPError:
            status = None
    assert status != 200, status


def refusals(authority: dict[str, str]) -> list[tuple[dict[str, str], str]]:
    cert, key = authority["cert"], authority["key"]
    return [
        ({"tls_certfile": cert}, "WEBSERVER_TLS_CERTFILE is set but WEBSERVER_TLS_KEYFILE is not"),
        ({"tls_keyfile": key}, "WEBSERVER_TLS_KEYFILE is set but WEBSERVER_TLS_CERTFILE is not"),
        ({"tls_certfile": "/nonexistent/cert.pem", "tls_keyfile": key}, "no such file"),
        ({"tls_certfile": cert, "tls_keyfile": authority["other_key"]},
         "is not the key of the certificate"),
        ({"tls_certfile": key, "tls_keyfile": key}, "not a PEM certificate chain"),
    ]


def test_a_pair_that_cannot_serve_is_one_sentence(authority: dict[str, str]) -> None:
    for given, words in refusals(authority):
        reason = tls.refusal(given.get("tls_certfile", ""), given.get("tls_keyfile", ""))
        assert reason is not None and words in reason, (given, reason)
    assert tls.refusal(authority["cert"], authority["key"]) is None
    assert tls.refusal("", "") is None


def test_serve_refuses_a_mismatched_key_before_it_starts(authority: dict[str, str]) -> None:
    env = {"WEBSERVER_TLS_CERTFILE": authority["cert"],
           "WEBSERVER_TLS_KEYFILE": authority["other_key"]}
    refused = subprocess.run([sys.executable, "-m", "cli", "serve"],
                             env={**os.environ, **env},
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2, refused.stderr
    assert "is not the key of the certificate" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr


def test_hypercorn_answers_http3_and_advertises_it(authority: dict[str, str]) -> None:
    """A real HTTP/3 client (aioquic's) gets 200 over QUIC, and the protocol it used is
    h3 on both ends: QUIC's ALPN, and the version the app saw."""
    from tests.http3_client import http3_get

    served.require("hypercorn")
    args = ["--engine", "hypercorn", "--loop", loop_for("hypercorn"), "--http3"]
    with running_server(args, env=tls_env(authority), https_ca=authority["ca"]) as server:
        port = int(server.url.rsplit(":", 1)[1])
        over_tcp = httpx.get(f"{server.url}/health/", verify=trusting(authority["ca"]))
        answer = asyncio.run(http3_get("127.0.0.1", port, "/health/detailed",
                                       authority["ca"]))
        output = server.output()
    assert over_tcp.headers.get("alt-svc", "").startswith(f'h3=":{port}"'), over_tcp.headers
    assert answer.alpn == "h3", answer
    assert answer.status == 200, (answer, output[-2000:])
    assert json.loads(answer.body)["http_version"] == "3", answer.body


@pytest.mark.parametrize(("engine", "env", "sentence"), [
    ("hypercorn", {}, "WEBSERVER_HTTP3=true needs TLS"),
    ("granian", None, "WEBSERVER_HTTP3=true cannot be honoured by granian"),
])
def test_http3_is_refused_without_tls_or_on_another_engine(
        engine: str, env: dict[str, str] | None, sentence: str,
        authority: dict[str, str]) -> None:
    served.require(engine)
    started = subprocess.run(
        [sys.executable, "-m", "cli", "serve", "--engine", engine, "--loop", loop_for(engine),
         "--http3"],
        env={**os.environ, **(tls_env(authority) if env is None else env)},
        capture_output=True, text=True, timeout=60, check=False)
    assert started.returncode == 2, started.stderr
    assert sentence in started.stderr and "Traceback" not in started.stderr, started.stderr
