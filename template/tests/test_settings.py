"""A setting that cannot work stops `serve` with one sentence and exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from pydantic_settings import BaseSettings, SettingsConfigDict
from typer.testing import CliRunner

from app import custom
from app.core import loops
from app.core import settings as config
from app.core.setting_specs import BY_NAME
from cli.main import cli
from serving import launcher, memory
from tests.server_process import PROJECT_DIR, free_port

NOT_INSTALLED = next(
    (name for name in loops.engine_loops("uvicorn", loops.python_version())[1:]
     if not loops.is_installed(name)),
    None,
)
WORKING_SETTINGS = {
    "WEBSERVER_ENGINE": "uvicorn", "WEBSERVER_LOOP": "auto", "WEBSERVER_HTTP": "auto",
    "WEBSERVER_HTTP2": "false", "WEBSERVER_WORKERS": "1", "WEBSERVER_RELOAD": "false",
    "WEBSERVER_LOG_LEVEL": "info", "WEBSERVER_WS_PING_INTERVAL": "0",
    "WEBSERVER_TRUSTED_PROXIES": "127.0.0.1",
}
@pytest.fixture(autouse=True)
def every_engine_and_loop_served(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the settings and the matrix: whatever the project serves,
    each engine and loop is there to be refused or accepted by its own rule."""
    monkeypatch.setenv("WEBSERVER_SERVED_ENGINES", "uvicorn,granian,gunicorn,hypercorn")
    monkeypatch.setenv("WEBSERVER_SERVED_LOOPS", "asyncio,uvloop,rloop,zuvloop,trio")


def serve_on_free_ports() -> list[str]:
    """`serve` on free ports: the metrics listener's default, 9464, may be another
    service's here (a `make serve` beside the tests)."""
    port = free_port()
    return ["serve", "--port", str(port), "--metrics-port", str(free_port(besides=port))]


BAD_SETTINGS = [
    ({"WEBSERVER_ENGINE": "nginx"}, "Unknown engine"),
    ({"WEBSERVER_LOOP": "tokio"}, "Unknown loop"),
    ({"WEBSERVER_ENGINE": "uvicorn", "WEBSERVER_LOOP": "trio"}, "trio needs the hypercorn engine"),
    ({"WEBSERVER_ENGINE": "granian", "WEBSERVER_LOOP": "trio"}, "trio needs the hypercorn engine"),
    ({"WEBSERVER_ENGINE": "uvicorn", "WEBSERVER_LOOP": "rloop"}, "rloop needs the granian engine"),
    ({"WEBSERVER_ENGINE": "granian", "WEBSERVER_LOOP": "zuvloop"}, "zuvloop needs the uvicorn"),
    # What the project serves (its answers; WEBSERVER_SERVED_* on one machine).
    ({"WEBSERVER_ENGINE": "granian", "WEBSERVER_SERVED_ENGINES": "uvicorn,hypercorn"},
     "this project does not serve the engine granian (it serves uvicorn, hypercorn): add it "
     "to WEBSERVER_SERVED_ENGINES to run it here, or to the project's answers to serve and "
     "test it everywhere: `copier update --trust --defaults --data 'served_engines=[uvicorn, "
     "hypercorn, granian]'`."),
    ({"WEBSERVER_ENGINE": "hypercorn", "WEBSERVER_LOOP": "trio",
      "WEBSERVER_SERVED_LOOPS": "asyncio,uvloop"},
     "this project does not serve the loop trio (it serves asyncio, uvloop)"),
    ({"WEBSERVER_SERVED_ENGINES": "uvicorn,nginx"}, "WEBSERVER_SERVED_ENGINES names 'nginx', "
     "not an engine: list some of uvicorn, granian, gunicorn, hypercorn."),
    ({"WEBSERVER_SERVED_LOOPS": " , "}, "WEBSERVER_SERVED_LOOPS is empty"),
    ({"WEBSERVER_PORT": "http"}, "WEBSERVER_PORT='http' is refused"),
    ({"WEBSERVER_PORT": "70000"}, "WEBSERVER_PORT='70000' is refused"),
    ({"WEBSERVER_WORKERS": "0"}, "WEBSERVER_WORKERS='0' is refused"),
    ({"WEBSERVER_LOG_LEVEL": "loud"}, "WEBSERVER_LOG_LEVEL='loud' is refused"),
    ({"WEBSERVER_RELOAD": "true", "WEBSERVER_WORKERS": "2"}, "cannot be combined"),
    ({"WEBSERVER_HTTP": "picohttp"}, "Unknown HTTP parser"),
    ({"WEBSERVER_ENGINE": "granian", "WEBSERVER_WS_PING_INTERVAL": "20"}, "no WebSocket pings"),
    ({"WEBSERVER_WS_PING_INTERVAL": "-1"}, "WEBSERVER_WS_PING_INTERVAL='-1' is refused"),
    ({"WEBSERVER_TRUSTED_PROXIES": "proxy.local"}, "is not an address or network"),
    ({"WEBSERVER_TRUSTED_PROXIES": "10.0.0.0/33"}, "is not an address or network"),
    # Lists the proxy-headers middleware would keep as text no address ever equals.
    ({"WEBSERVER_TRUSTED_PROXIES": "10.0.0.1/8"}, "WEBSERVER_TRUSTED_PROXIES='10.0.0.1/8' "
     "is refused: '10.0.0.1/8' has host bits set, so it would match no address: write "
     "10.0.0.0/8."),
    ({"WEBSERVER_TRUSTED_PROXIES": "127.0.0.1,*"}, "is refused: * trusts every address and "
     "must stand alone: give * by itself, or addresses and networks without it."),
    ({"WEBSERVER_ENGINE": "granian", "WEBSERVER_HTTP": "zttp"}, "has no parser choice"),
    ({"WEBSERVER_ENGINE": "uvicorn", "WEBSERVER_HTTP": "httptools", "WEBSERVER_HTTP2": "true"},
     "HTTP/2 under uvicorn needs the zttp parser"),
    ({"WEBSERVER_ENGINE": "uvicorn", "WEBSERVER_HTTP2": "true"}, "needs the zttp parser"),
    # gunicorn: its loops, its parsers, and what its asgi worker cannot do.
    ({"WEBSERVER_ENGINE": "gunicorn", "WEBSERVER_LOOP": "rloop"},
     "rloop needs the granian engine: gunicorn's asgi worker runs asyncio or uvloop only"),
    ({"WEBSERVER_ENGINE": "gunicorn", "WEBSERVER_HTTP": "httptools"},
     "httptools is a parser of uvicorn, not of gunicorn: gunicorn takes auto, h1c or python."),
    ({"WEBSERVER_ENGINE": "uvicorn", "WEBSERVER_HTTP": "python"}, "not of uvicorn"),
    ({"WEBSERVER_ENGINE": "gunicorn", "WEBSERVER_THREADS": "4"}, "ignores threads"),
    ({"WEBSERVER_ENGINE": "gunicorn", "WEBSERVER_MAX_CONCURRENCY": "10"},
     "caps neither connections nor requests"),
    ({"WEBSERVER_ENGINE": "gunicorn", "WEBSERVER_WORKER_LIFETIME": "3600"},
     "cannot recycle a worker by age"),
    # A name that is not a setting would be ignored: refused, with the likely one.
    ({"WEBSERVER_WORKER": "4"}, "WEBSERVER_WORKER (in the environment) is not a setting"
     " of this service; did you mean WEBSERVER_WORKERS?"),
    ({"WEBSERVER_FORWARDED_ALLOW_IPS": "10.0.0.0/8"}, "was renamed WEBSERVER_TRUSTED_PROXIES"),
    # A bound is worded from the setting's declaration, as the Copier question words it.
    ({"WEBSERVER_PORT": "0"}, "WEBSERVER_PORT='0' is refused: give a whole number from 1 to "
     "65535."),
    ({"WEBSERVER_ACCESS_LOG": "xml"}, "WEBSERVER_ACCESS_LOG='xml' is refused: choose off, "
     "text, json."),
]
if loops.python_version() < (3, 14):
    BAD_SETTINGS.append(
        ({"WEBSERVER_ENGINE": "uvicorn", "WEBSERVER_LOOP": "zuvloop"}, "needs Python 3.14")
    )
if NOT_INSTALLED:
    BAD_SETTINGS.append(
        ({"WEBSERVER_ENGINE": "uvicorn", "WEBSERVER_LOOP": NOT_INSTALLED}, "is not installed")
    )


@pytest.mark.parametrize(("settings", "sentence"), BAD_SETTINGS, ids=str)
def test_bad_setting_is_one_sentence_and_exit_2(
    settings: dict[str, str], sentence: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def must_not_start(*_: object) -> None:
        raise AssertionError("the server was started")

    monkeypatch.setattr(launcher, "serve", must_not_start)
    # Each case changes one thing from settings that work (the project's .env may not).
    ports = {"WEBSERVER_PORT": str(free_port()), "WEBSERVER_METRICS_PORT": str(free_port())}
    for name, value in {**WORKING_SETTINGS, **ports, **settings}.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli, ["serve"])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stderr.startswith("Cannot start: ")
    assert sentence in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_misspelled_name_in_the_env_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("WEBSERVER_ENGNE=granian\n")
    assert config.unknown_settings_refusal() == (
        "WEBSERVER_ENGNE (in .env) is not a setting of this service; "
        "did you mean WEBSERVER_ENGINE?"
    )
    (tmp_path / ".env").write_text("WEBSERVER_ENGINE=granian\nOTHER_TOOL=1\n")
    assert config.unknown_settings_refusal() is None


class GreetingSettings(BaseSettings):
    """A user's AppSettings (app/custom.py) with one field."""

    model_config = SettingsConfigDict(env_prefix="APP_", env_file=".env", extra="ignore")
    greeting: str = "Hello"


@pytest.fixture
def app_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """GreetingSettings as the app's, in a directory without .env, no APP_ names set."""
    monkeypatch.setattr(custom, "AppSettings", GreetingSettings)
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.upper().startswith("APP_"):
            monkeypatch.delenv(name)
    return tmp_path


@pytest.mark.parametrize("source", ["the environment", ".env"])
def test_a_misspelled_app_setting_is_refused_as_a_server_one_is(
    app_settings: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """APP_ names are the user's (AppSettings in app/custom.py): one check for both."""
    def given(name: str) -> None:
        if source == ".env":
            (app_settings / ".env").write_text(f"{name}=Hi\n")
        else:
            monkeypatch.setenv(name, "Hi")

    given("APP_GREETNG")
    assert config.unknown_settings_refusal() == (
        f"APP_GREETNG (in {source}) is not a setting of this service; "
        "did you mean APP_GREETING?"
    )
    monkeypatch.delenv("APP_GREETNG", raising=False)
    given("APP_GREETING")
    assert config.unknown_settings_refusal() is None
    given("APP_SHOUTING_LOUDLY")  # resembles no setting: noted, not refused
    assert config.unknown_settings() == (None, [
        f"APP_SHOUTING_LOUDLY (in {source}) is not a setting of this service and is "
        "ignored; to use it, declare it on AppSettings in app/custom.py"])


def test_an_unknown_app_name_like_none_is_one_note_and_the_service_starts(
    app_settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A platform may inject APP_ENV=production: a note, then the server starts."""
    started = []
    monkeypatch.setattr(launcher, "serve", lambda *_: started.append(True))
    for name, value in {**WORKING_SETTINGS, "APP_ENV": "production"}.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli, serve_on_free_ports())
    assert result.exit_code == 0, result.output
    assert started == [True]
    assert result.stderr == (
        "Note: APP_ENV (in the environment) is not a setting of this service and is "
        "ignored; to use it, declare it on AppSettings in app/custom.py.\n")


class SecretSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="APP_", env_file=".env", extra="ignore")
    api_key: str
    db_password: str = "changeme"


def refused_with_app_settings(monkeypatch: pytest.MonkeyPatch, declared: type,
                              given: dict[str, str]) -> Result:
    """`serve` with `declared` as the app's AppSettings and `given` set: refused, exit 2."""
    monkeypatch.setattr(custom, "AppSettings", declared)
    monkeypatch.setattr(launcher, "serve", lambda *_: pytest.fail("the server was started"))
    for name, value in {**WORKING_SETTINGS, **given}.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli, serve_on_free_ports())
    assert result.exit_code == 2, result.output
    return result


def test_a_missing_app_setting_is_named_and_no_value_is_shown(
    app_settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = refused_with_app_settings(monkeypatch, SecretSettings,
                                       {"APP_DB_PASSWORD": "hunter2"})
    assert result.stderr == ("Cannot start: APP_API_KEY is required: set it in the "
                             "environment or .env.\n")


class PagedSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="APP_", env_file=".env", extra="ignore")
    page_size: int = 20


def test_a_bad_value_of_an_app_setting_is_one_sentence_and_exit_2(
    app_settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = refused_with_app_settings(monkeypatch, PagedSettings, {"APP_PAGE_SIZE": "fifty"})
    assert result.stderr.startswith("Cannot start: APP_PAGE_SIZE='fifty' is refused: ")
    assert "integer" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_serve_refuses_a_misspelled_app_setting_with_exit_2(
    app_settings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launcher, "serve", lambda *_: pytest.fail("the server was started"))
    for name, value in {**WORKING_SETTINGS, "APP_GREETNG": "Hi"}.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli, serve_on_free_ports())
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "Cannot start: APP_GREETNG (in the environment) is not a setting of this service; "
        "did you mean APP_GREETING?\n"
    )


def test_port_out_of_bounds_is_worded_from_its_declaration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--port 0` and the Copier question say the same: both read the port's bounds."""
    monkeypatch.setattr(launcher, "serve", lambda *_: pytest.fail("the server was started"))
    for name, value in WORKING_SETTINGS.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(cli, ["serve", "--port", "0"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "Cannot start: --port 0 is refused: give a whole number from 1 to 65535.\n"
    )
    assert BY_NAME["port"].wanted() == "give a whole number from 1 to 65535"


def test_refusal_from_a_real_process_has_no_traceback() -> None:
    env = {**os.environ, **WORKING_SETTINGS, "WEBSERVER_LOOP": "rloop"}
    result = subprocess.run(
        [sys.executable, "-m", "cli", "serve", "--port", str(free_port())],
        cwd=PROJECT_DIR, env=env, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("Cannot start: rloop needs the granian engine")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(("given", "read"), [
    ("127.0.0.1", "127.0.0.1"),
    ("127.0.0.1, 10.0.0.0/8 , ::1", "127.0.0.1,10.0.0.0/8,::1"),
    ("192.168.0.0/255.255.0.0,fd00::/8", "192.168.0.0/255.255.0.0,fd00::/8"),
    (" * ", "*"),
])
def test_every_accepted_proxy_list_is_honoured_by_the_middleware(
    given: str, read: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What WEBSERVER_TRUSTED_PROXIES accepts, the proxy-headers middleware
    (app/middleware/forwarded.py, on every engine) matches: an address of every entry is
    trusted. `10.0.0.1/8` and a `*` among others, which would match nothing, are
    refused (BAD_SETTINGS)."""
    import ipaddress

    from app.middleware.forwarded import TrustedProxies

    monkeypatch.chdir(tmp_path)  # no .env
    for name, value in WORKING_SETTINGS.items():
        monkeypatch.setenv(name, value)
    value = config.Settings(trusted_proxies=given).trusted_proxies
    assert value == read
    trusted = TrustedProxies(value)
    for entry in value.split(","):
        if entry == "*":
            assert trusted.trusts("198.51.100.1")
            continue
        assert trusted.trusts(str(ipaddress.ip_network(entry)[-1])), entry
    assert not trusted.trusts("198.51.100.1") or value == "*"


CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, PR_CAPBSET_DROP = 1, 2, 24


def _read_by_mode_even_as_root() -> None:
    """In the child before exec: root reads any file whatever its mode, through these two
    capabilities; dropped from the bounding set, the exec'd Python reads a mode-000 file
    as anyone would. Real permissions, no mock (as another user the child could not
    read the project in pytest's private tmp directory)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) refused")


def _unreadable(env_file: Path) -> None:
    env_file.write_text("WEBSERVER_PORT=9000\n")
    env_file.chmod(0)


# How a `.env` can be bad, and the sentence (after "Cannot start: ") naming it.
BAD_ENV_FILES = [
    pytest.param(lambda env: env.write_bytes(b"WEBSERVER_PORT=9000\nAPP_NOTE=d\xe9j\xe0\n"),
                 "{env} is not UTF-8 text (line 2 holds the byte 0xe9): save it as UTF-8.",
                 id="not-utf-8"),
    pytest.param(_unreadable, "{env} cannot be read (Permission denied): let this process "
                 "read it, or remove it.", id="unreadable"),
    pytest.param(Path.mkdir, "{env} is a directory, not a settings file: remove it, or put "
                 "the settings in a file of that name.", id="directory"),
    pytest.param(lambda env: env.write_text("# local\nWEBSERVER_PORT 9000\nOTHER_TOOL=1\n"),
                 "line 2 of {env} cannot be parsed as NAME=value: fix it (quote a value "
                 "holding spaces, # or quotes) or comment it out with #.", id="unparsable-line"),
]
# Passed over silently too; the same check (in-process: each real start costs a second).
OTHER_BAD_ENV_FILES = [
    pytest.param(os.mkfifo, "{env} is a named pipe, not a settings file: remove it, or put "
                 "the settings in a file of that name.", id="named-pipe"),
    pytest.param(lambda env: env.symlink_to(env.with_name("gone")), "{env} is a symbolic "
                 "link to {gone}, which does not exist: fix the link or remove it.",
                 id="broken-link"),
    pytest.param(lambda env: env.symlink_to(env), "{env} cannot be read (Too many levels of "
                 "symbolic links): let this process read it, or remove it.", id="link-loop"),
]


@pytest.mark.parametrize(("make", "sentence"), BAD_ENV_FILES)
def test_a_bad_env_file_stops_serve_with_one_sentence_naming_it(
    make: Callable[[Path], object], sentence: str, tmp_path: Path
) -> None:
    """Through the real CLI: one sentence, not a traceback of 100+ lines (not UTF-8,
    unreadable), nor a start without the file's settings (a directory, a pipe, a broken
    link, a line python-dotenv skips with a warning)."""
    project = tmp_path.resolve()
    env_file = project / ".env"
    make(env_file)
    before = os.lstat(env_file)
    preexec = None
    if make is _unreadable and os.geteuid() == 0:
        preexec = _read_by_mode_even_as_root
    command = [sys.executable, "-m", "cli", "serve", "--port", str(free_port())]
    environment = {**os.environ, **WORKING_SETTINGS, "PYTHONPATH": str(PROJECT_DIR),
                   config.ENV_FILE_VARIABLE: config.ENV_FILE}  # this test is about .env
    try:
        result = subprocess.run(command, cwd=project, env=environment, capture_output=True,
                                text=True, timeout=20, preexec_fn=preexec)
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"serve started despite the bad .env:\n{expired.stderr!r}")
    except subprocess.SubprocessError as error:  # the prctl above, in a locked-down root
        pytest.skip(f"cannot make a file unreadable to root here: {error}")
    expected = sentence.format(env=env_file, gone=env_file.with_name("gone"))
    assert (result.returncode, result.stderr, result.stdout) == (
        2, f"Cannot start: {expected}\n", "")
    after = os.lstat(env_file)  # left as it was: nothing read into it or rewritten
    assert (after.st_mode, after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_mode, before.st_size, before.st_mtime_ns, before.st_ino)


@pytest.mark.parametrize(("make", "sentence"), OTHER_BAD_ENV_FILES)
def test_a_pipe_or_a_broken_link_as_env_file_is_refused_too(
    make: Callable[[Path], object], sentence: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path.resolve()
    monkeypatch.chdir(project)
    make(project / ".env")
    env_file = project / ".env"
    assert config.env_file_refusal() == sentence.format(env=env_file,
                                                        gone=env_file.with_name("gone"))


def test_every_setting_appears_wherever_it_must() -> None:
    """Declared once: `serve --help`, .env.example and docs/settings.md all list it."""
    from typer.testing import CliRunner

    from app.core.settings import SETTINGS
    from cli.main import cli

    project = Path(__file__).resolve().parents[1]
    help_text = CliRunner().invoke(cli, ["serve", "--help"], env={"COLUMNS": "200"}).stdout
    example = (project / ".env.example").read_text()
    table = (project / "docs" / "settings.md").read_text()
    for spec in SETTINGS:
        assert spec.option in help_text, spec.option
        assert f"\n{spec.env}=" in example, spec.env
        assert f"| `{spec.env}` |" in table, spec.env


# -- which file of local overrides (WEBSERVER_ENV_FILE) ---------------------------------

def test_the_env_file_is_dot_env_another_named_or_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WEBSERVER_WORKERS", raising=False)
    (tmp_path / ".env").write_text("WEBSERVER_WORKERS=3\n")
    (tmp_path / "staging.env").write_text("WEBSERVER_WORKERS=5\n")
    default = BY_NAME["workers"].default_for(config.ANSWERS)
    for named, workers in ((None, 3), ("staging.env", 5), ("", default)):
        if named is None:
            monkeypatch.delenv(config.ENV_FILE_VARIABLE, raising=False)
        else:
            monkeypatch.setenv(config.ENV_FILE_VARIABLE, named)
        assert config.load_settings().workers == workers, named
    monkeypatch.setenv(config.ENV_FILE_VARIABLE, "stagng.env")
    with pytest.raises(config.SettingsError, match=r"WEBSERVER_ENV_FILE=stagng\.env names no file"):
        config.load_settings()


# -- the settings against the container's memory (serving/memory.py) -------------------

def test_the_cgroups_memory_limit_is_read_in_mib(tmp_path: Path) -> None:
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    v2.write_text("max\n")
    assert memory.container_limit_mib((v2, v1)) is None
    v2.write_text("335544320\n")
    assert memory.container_limit_mib((v2, v1)) == 320
    v1.write_text("9223372036854771712\n")  # v1's "no limit"
    assert memory.container_limit_mib((tmp_path / "absent", v1)) is None
    assert memory.container_limit_mib((tmp_path / "absent",)) is None


def test_serve_warns_when_the_workers_budgets_pass_the_containers_limit() -> None:
    """The Deployment's formula (setting_specs.memory_limit_mib): 192 MiB besides the
    workers, each 128 MiB and 1.25 times its body budget."""
    settings = config.get_settings().model_copy(update={"workers": 2, "body_budget": 16 << 20})
    assert memory.memory_warning(settings, None) is None
    assert memory.memory_warning(settings, 488) is None  # 192 + 2 x (128 + 20)
    warning = memory.memory_warning(settings, 487)
    assert warning is not None and "488 MiB" in warning and "487 MiB" in warning
    unbounded = settings.model_copy(update={"body_budget": 0})
    assert "nothing bounds" in (memory.memory_warning(unbounded, 4096) or "")


@pytest.mark.parametrize(("served_loops", "engine", "expected"), [
    ("asyncio", "uvicorn", "asyncio"), ("asyncio,uvloop", "granian", "uvloop"),
    ("rloop,asyncio", "granian", "asyncio")])
def test_auto_picks_among_the_loops_the_project_serves(
        served_loops: str, engine: str, expected: str) -> None:
    settings = config.load_settings(engine=engine, loop="auto", served_loops=served_loops)
    assert settings.resolved_loop == expected


def test_a_flag_refused_is_named_as_the_flag_and_a_bad_value_it_replaces_is_noted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[object] = []
    monkeypatch.setattr(launcher, "serve", started.append)
    refused = CliRunner().invoke(cli, [*serve_on_free_ports(), "--workers", "0"])
    assert (refused.exit_code, refused.stderr) == (
        2, "Cannot start: --workers 0 is refused: give a whole number from 1 to 64.\n")

    (tmp_path / "local.env").write_text("WEBSERVER_WORKERS=abc\n")
    monkeypatch.setenv(config.ENV_FILE_VARIABLE, str(tmp_path / "local.env"))
    replaced = CliRunner().invoke(cli, [*serve_on_free_ports(), "--workers", "2"])
    assert replaced.exit_code == 0 and len(started) == 1, replaced.output
    assert replaced.stderr == ("Note: WEBSERVER_WORKERS='abc' is refused: give a whole number "
                               "from 1 to 64 (its flag replaced it for this run).\n")
