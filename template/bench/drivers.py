"""Load generators: how each is run, what it can send, and how its output is read.

Tried in order (wrk, h2load, the bundled Python driver); ab only when asked, because
it sends HTTP/1.0 keep-alive, which uvicorn closes (measured: 40.9k -> 11.9k req/s).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.route import Route


@dataclass
class LoadResult:
    driver: str
    requests: int  # responses received in the counted window
    seconds: float
    non_2xx: int
    failed: int  # connect/read/write errors and timeouts
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    mean_ms: float | None = None

    @property
    def requests_per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "requests_per_second": self.requests_per_second}


class DriverError(RuntimeError):
    pass


class Driver:
    name = ""
    binary = ""
    note = ""  # printed whenever the driver is used
    whole_seconds = True  # runs for whole seconds only (wrk, h2load, ab)

    def available(self) -> bool:
        return shutil.which(self.binary) is not None

    def can_send(self, route: Route) -> bool:
        return True

    def command(self, url: str, route: Route, connections: int, seconds: float,
                workdir: Path) -> list[str]:
        raise NotImplementedError

    def parse(self, output: str) -> LoadResult:
        raise NotImplementedError


def _lua_string(value: str | bytes) -> str:
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    level = "=" * 4
    while f"]{level}]" in text:
        level += "="
    return f"[{level}[{text}]{level}]"


class Wrk(Driver):
    name = binary = "wrk"
    # wrk counts 3xx as success; percentiles come from its own histogram.
    DONE = """
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK-JSON {\\"requests\\":%d,\\"duration_us\\":%d,\\"non_2xx\\":%d,\\"failed\\":%d,"
    .. "\\"p50\\":%d,\\"p95\\":%d,\\"p99\\":%d,\\"mean\\":%f}\\n",
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), latency.mean))
end
"""

    def script(self, route: Route) -> str:
        lines = [f"wrk.method = {_lua_string(route.method)}"]
        if route.body:
            lines.append(f"wrk.body = {_lua_string(route.body)}")
        # The spaces matter: `[[` would open a Lua long string.
        lines += [f"wrk.headers[ {_lua_string(k)} ] = {_lua_string(v)}" for k, v in route.headers]
        return "\n".join(lines) + "\n" + self.DONE

    def command(self, url: str, route: Route, connections: int, seconds: float,
                workdir: Path) -> list[str]:
        script = workdir / "bench.lua"
        script.write_text(self.script(route))
        return ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s",
                "--timeout", "10s", "-s", str(script), url]

    def parse(self, output: str) -> LoadResult:
        match = re.search(r"^WRK-JSON (\{.*\})$", output, re.MULTILINE)
        if not match:
            raise DriverError(f"wrk printed no summary:\n{output[-2000:]}")
        data = json.loads(match[1])
        return LoadResult(
            self.name, data["requests"], data["duration_us"] / 1e6, data["non_2xx"],
            data["failed"], data["p50"] / 1000, data["p95"] / 1000, data["p99"] / 1000,
            data["mean"] / 1000,
        )


def _duration_ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


class H2load(Driver):
    name = binary = "h2load"
    note = "h2load reports no latency percentiles (mean only)"

    def can_send(self, route: Route) -> bool:
        # h2load sends GET, or POST when given a body (-d); no other method.
        return route.method == ("POST" if route.body else "GET")

    def command(self, url: str, route: Route, connections: int, seconds: float,
                workdir: Path) -> list[str]:
        argv = ["h2load", "--h1", "-t1", f"-c{connections}", "-m1", f"-D{max(1, round(seconds))}"]
        argv += [arg for k, v in route.headers for arg in ("-H", f"{k}: {v}")]
        if route.body:
            body = workdir / "body"
            body.write_bytes(route.body)
            argv += ["-d", str(body)]
        return [*argv, url]

    def parse(self, output: str) -> LoadResult:
        # Under a second, h2load gives the run's length in ms (or us), as its latencies.
        finished = re.search(r"finished in ([\d.]+(?:us|ms|s)),", output)
        counts = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, "
                           r"(\d+) failed, (\d+) errored, (\d+) timeout", output)
        codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", output)
        timing = re.search(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)", output)
        if not (finished and counts and codes):
            raise DriverError(f"h2load printed no summary:\n{output[-2000:]}")
        done = int(counts[1])
        non_2xx = sum(int(codes[i]) for i in (2, 3, 4))
        failed = int(counts[4]) + int(counts[5])
        mean = _duration_ms(timing[3]) if timing else None
        return LoadResult(self.name, done, _duration_ms(finished[1]) / 1000, non_2xx, failed,
                          None, None, None, mean)


class Python(Driver):
    name = "python"
    note = "bundled asyncio driver (uvloop where installed), one request in flight per connection"
    whole_seconds = False

    def available(self) -> bool:
        return True

    def command(self, url: str, route: Route, connections: int, seconds: float,
                workdir: Path) -> list[str]:
        spec = workdir / "route.json"
        spec.write_text(json.dumps({"method": route.method, "headers": route.headers,
                                    "body": route.body.decode("latin-1")}))
        return [sys.executable, "-m", "bench.pydriver", url, str(connections),
                str(seconds), str(spec)]

    def parse(self, output: str) -> LoadResult:
        data = json.loads(output.strip().splitlines()[-1])
        return LoadResult(self.name, **data)


class ApacheBench(Driver):
    name = "ab"
    binary = "ab"
    note = ("ab sends HTTP/1.0 keep-alive, which uvicorn closes after each response: "
            "it measures connection handling, not the engines' request path; its "
            "percentiles are whole milliseconds")

    def can_send(self, route: Route) -> bool:
        # -p sends a body as POST and cannot be combined with another method.
        return not route.body or route.method == "POST"

    def command(self, url: str, route: Route, connections: int, seconds: float,
                workdir: Path) -> list[str]:
        argv = ["ab", "-k", "-q", "-c", str(connections), "-t", str(max(1, round(seconds))),
                "-n", "10000000"]
        if not route.body:
            argv += ["-m", route.method]
        argv += [arg for k, v in route.headers for arg in ("-H", f"{k}: {v}")]
        if route.body:
            body = workdir / "body"
            body.write_bytes(route.body)
            content_type = dict((k.lower(), v) for k, v in route.headers).get(
                "content-type", "application/octet-stream")
            argv += ["-p", str(body), "-T", content_type]
        return [*argv, url]

    def parse(self, output: str) -> LoadResult:
        def number(pattern: str, default: float | None = None) -> float | None:
            match = re.search(pattern, output, re.MULTILINE)
            return float(match[1]) if match else default

        complete = number(r"^Complete requests:\s+(\d+)")
        seconds = number(r"^Time taken for tests:\s+([\d.]+)")
        if complete is None or seconds is None:
            raise DriverError(f"ab printed no summary:\n{output[-2000:]}")
        return LoadResult(
            self.name, int(complete), seconds, int(number(r"^Non-2xx responses:\s+(\d+)", 0)),
            int(number(r"^Failed requests:\s+(\d+)", 0)),
            number(r"^\s+50%\s+(\d+)"), number(r"^\s+95%\s+(\d+)"), number(r"^\s+99%\s+(\d+)"),
            number(r"^Time per request:\s+([\d.]+) \[ms\] \(mean\)$"),
        )


AUTO_ORDER: tuple[Driver, ...] = (Wrk(), H2load(), Python())
ALL: dict[str, Driver] = {d.name: d for d in (*AUTO_ORDER, ApacheBench())}


def choose(name: str, route: Route,
           order: tuple[Driver, ...] = AUTO_ORDER) -> tuple[Driver, list[str]]:
    """The driver to use, and why others were passed over (named in the output)."""
    skipped: list[str] = []
    if name != "auto":
        driver = ALL[name]
        if not driver.available():
            raise DriverError(f"{name} is not installed (apt-get install {name}).")
        if not driver.can_send(route):
            raise DriverError(f"{name} cannot send {route.method} with this payload.")
        return driver, skipped
    for driver in order:
        if not driver.available():
            skipped.append(f"{driver.name}: not installed")
        elif not driver.can_send(route):
            skipped.append(f"{driver.name}: cannot send {route.method}"
                           f"{' with a body' if route.body else ''}")
        else:
            return driver, skipped
    raise DriverError("no load driver can send this request")  # the Python one always can
