"""`bench engines`' statistics on synthetic runs (no server): a known ratio under a
drifting machine and noise is held by the interval, equal servers are called alike,
and noise or too few rounds decide nothing."""

from __future__ import annotations

import math
import random
import re

import pytest

from bench import drivers, harness, ladder_report, machine, stats
from bench.model import Config, Round, Run, Slice
from bench.route import Route
from bench.stats import Call
from bench.verdict import summarize, verdict, warnings

ROUTE = Route("/health/")


def synthetic_run(ratio: float, noise: float, rounds: int = 30, cpu_ratio: float = 1.0,
                  seed: int = 1, set_aside: tuple[int, ...] = ()) -> Run:
    """Two servers, B `ratio` times A's requests/s and `cpu_ratio` times its CPU per
    request, on a machine whose speed drifts by 1.5x over the run, with independent
    log-normal noise of `noise` on every slice."""
    generator = random.Random(seed)
    # Loops named: `auto` resolves per Python (zuvloop on 3.14), the labels must not.
    run = Run([Config("uvicorn", "uvloop"), Config("granian", "uvloop")], 0, 1.0, rounds)
    for number in range(rounds):
        speed = 1 + 0.5 * math.sin(number / 5)  # the machine: 0.5x to 1.5x
        this = Round([number % 2, 1 - number % 2])
        for index, (rate, cpu_us) in enumerate([(8000.0, 120.0),
                                                (8000.0 * ratio, 120.0 * cpu_ratio)]):
            requests = int(rate * speed * generator.lognormvariate(0, noise))
            cpu_s = requests * cpu_us / speed * generator.lognormvariate(0, noise) / 1e6
            load = drivers.LoadResult("synthetic", requests, 1.0, 0, 0, 1.0, 2.0, 3.0)
            reason = "server core 40% taken (steal)" if number in set_aside else None
            this.slices[index] = Slice(load, cpu_s, set_aside=reason)
        run.rounds.append(this)
    return run


def compared(run: Run):  # the one comparison of a two-server run
    (only,) = summarize(run).compared
    return only


def test_a_known_ratio_is_inside_the_interval_and_called() -> None:
    result = compared(synthetic_run(ratio=1.08, noise=0.03, cpu_ratio=0.92))
    speed, cpu = result.estimates["requests_per_second"], result.estimates["cpu_us_per_request"]
    assert speed is not None and cpu is not None
    assert speed.low <= 1.08 <= speed.high and speed.high - speed.low < 0.06, speed
    assert cpu.low <= 0.92 <= cpu.high, cpu
    assert result.calls == {"requests_per_second": Call.HIGHER,
                            "cpu_us_per_request": Call.LOWER}


def test_the_interval_holds_the_true_ratio_about_95_times_in_100() -> None:
    held = 0
    for seed in range(100):
        ratios = [1.05 * random.Random(seed * 1000 + i).lognormvariate(0, 0.04)
                  for i in range(30)]
        estimate = stats.median_interval(ratios, resamples=2000)
        assert estimate is not None
        held += estimate.low <= 1.05 <= estimate.high
    assert 88 <= held <= 100, held


def test_equal_servers_are_no_measurable_difference() -> None:
    run = synthetic_run(ratio=1.0, noise=0.02)
    assert set(compared(run).calls.values()) == {Call.SAME}
    sentences = verdict(summarize(run), ROUTE, app_cost_us=None)
    assert "no measurable difference in requests/s on /health/" in sentences[0]
    assert "within ±3%" in sentences[0]
    assert sentences[1].startswith("No measurable difference in CPU per request")


def test_the_slower_side_is_named_as_the_slower() -> None:
    sentences = verdict(summarize(synthetic_run(ratio=0.9, noise=0.02, cpu_ratio=1.1)),
                        ROUTE, app_cost_us=None)
    assert sentences[0].startswith("uvicorn / uvloop / httptools is faster than granian")
    assert "1.11x" in sentences[0]  # 1 / 0.9, the faster over the slower
    assert sentences[1].startswith("uvicorn / uvloop / httptools costs less CPU per request")


def test_noise_decides_nothing_and_says_how_to_decide() -> None:
    run = synthetic_run(ratio=1.03, noise=0.25)
    assert compared(run).calls["requests_per_second"] is Call.UNDECIDED
    sentences = verdict(summarize(run), ROUTE, app_cost_us=None)
    assert "straddles the ±3% threshold: too noisy to decide" in sentences[0], sentences
    assert any("--duration 60" in s and "quieter machine" in s for s in sentences), sentences
    assert any("unstable" in note for note in warnings(summarize(run)))


def test_too_few_rounds_decide_nothing() -> None:
    run = synthetic_run(ratio=1.5, noise=0.01, rounds=stats.MIN_ROUNDS - 1)
    assert set(compared(run).calls.values()) == {Call.UNDECIDED}
    assert "too few to decide" in verdict(summarize(run), ROUTE, app_cost_us=None)[0]


def test_rounds_set_aside_are_left_out_and_counted() -> None:
    run = synthetic_run(ratio=1.08, noise=0.03, set_aside=(3, 4, 5))
    assert len(run.kept) == 27
    assert compared(run).estimates["requests_per_second"].n == 27  # type: ignore[union-attr]
    assert "3 of 30 rounds set aside (6 slices: the server's core was taken away" in \
        warnings(summarize(run))[0]


def test_every_round_set_aside_is_said_plainly() -> None:
    run = synthetic_run(ratio=1.08, noise=0.03, rounds=8, set_aside=tuple(range(8)))
    assert verdict(summarize(run), ROUTE, app_cost_us=None)[0].startswith(
        "All 8 rounds were set aside")


def test_outliers_are_counted_and_barely_move_the_median() -> None:
    run = synthetic_run(ratio=1.08, noise=0.02)
    clean = compared(run).estimates["requests_per_second"]
    for number in (7, 19):  # a server stalled for half of its slice
        run.rounds[number].slices[0].load.requests //= 2
    result = compared(run)
    assert abs(result.estimates["requests_per_second"].median - clean.median) < 0.01
    assert any("2 of 30 per-round ratios are outliers" in n for n in warnings(summarize(run)))


def test_the_same_figures_give_the_same_interval() -> None:
    values = [random.Random(i).gauss(1.0, 0.1) for i in range(25)]
    # Few resamples, so that the generator's draws show in the interval.
    first = stats.median_interval(values, resamples=50)
    assert all(first == stats.median_interval(values[::-1], resamples=50) for _ in range(10))
    assert any(first != stats.median_interval(values, resamples=50, seed=seed)
               for seed in range(10))


@pytest.mark.parametrize(("low", "high", "expected"), [
    (1.031, 1.2, Call.HIGHER), (0.8, 0.97, Call.LOWER), (0.975, 1.025, Call.SAME),
    (1.01, 1.05, Call.UNDECIDED), (0.95, 1.01, Call.UNDECIDED)])
def test_the_call_follows_the_interval(low: float, high: float, expected: Call) -> None:
    estimate = stats.Estimate((low + high) / 2, low, high, n=20)
    assert stats.call(estimate, threshold=0.03) is expected


def test_a_core_taken_from_the_server_or_the_driver_sets_a_slice_aside() -> None:
    def shares(idle: float, steal: float, ours: float) -> machine.Shares | None:
        return machine.shares(machine.CoreTimes(1.0, idle, steal), 1, ours)

    assert machine.taken_from_server(shares(0.01, 0.0, 0.98)) is None
    assert machine.taken_from_server(shares(0.0, 0.3, 0.7)) == "server core 30% taken (steal)"
    assert "other processes" in machine.taken_from_server(shares(0.2, 0.0, 0.5))  # type: ignore[operator]
    assert machine.taken_from_driver(shares(0.86, 0.0, 0.14)) is None  # the driver alone
    assert machine.taken_from_driver(shares(0.5, 0.0, 0.15)) is None  # others, with room
    assert machine.taken_from_driver(shares(0.05, 0.0, 0.15)) == \
        "driver cores 80% of a core taken"
    many = machine.shares(machine.CoreTimes(8.0, 6.0, 0.0), 8, 0.2)  # 8 cores, room to spare
    assert machine.taken_from_driver(many) is None


def cpu_run(reference_us: list[float], mine_us: list[float]) -> Run:
    """Two servers with these CPU µs per request, round by round (equal requests/s)."""
    run = Run([Config("uvicorn", "uvloop"), Config("granian", "uvloop")], 0, 1.0,
              len(reference_us))
    for number, pair in enumerate(zip(reference_us, mine_us, strict=True)):
        this = Round([number % 2, 1 - number % 2])
        for index, cpu_us in enumerate(pair):
            load = drivers.LoadResult("synthetic", 10_000, 1.0, 0, 0, 1.0, 2.0, 3.0)
            this.slices[index] = Slice(load, 10_000 * cpu_us / 1e6)
        run.rounds.append(this)
    return run


def test_the_cpu_sentence_reads_its_ratio_in_microseconds_of_the_same_rounds() -> None:
    # Per-round ratios .9 .909 .917 .769 .786 .8 .812: median 0.8125. The reference's
    # median over those rounds is 130, so the saving is (1 - 0.8125) x 130 = 24.4 µs,
    # where the difference of the two medians (130 - 110) would say 20.0.
    run = cpu_run([100, 110, 120, 130, 140, 150, 160], [90, 100, 110, 100, 110, 120, 130])
    sentence = next(line for line in verdict(summarize(run), ROUTE, None)
                    if "costs less CPU" in line)
    assert sentence.startswith("granian / uvloop / hyper costs less CPU per request than "
                               "uvicorn"), sentence
    assert "0.81x (95 % CI" in sentence and ", 24.4 µs less a request (95 % CI " in sentence
    assert "of 130.0 µs (the median of the same 7 rounds)" in sentence
    ratio_low, ratio_high = map(float, re.search(r"x \(95 % CI ([\d.]+)-([\d.]+)\)",
                                                 sentence).groups())  # type: ignore[union-attr]
    us_low, us_high = map(float, re.search(r"less a request \(95 % CI ([\d.]+)-([\d.]+)\)",
                                           sentence).groups())  # type: ignore[union-attr]
    # Read back with the printed ratio: each end of one interval is the other's, in µs.
    assert abs(us_low - (1 - ratio_high) * 130) < 0.7 and abs(us_high - (1 - ratio_low) * 130) < 0.7


def test_the_cpu_sentence_names_the_dearer_side_when_the_reference_is_cheaper() -> None:
    # The same rounds, the sides swapped: granian's per-round ratios to the reference
    # have the median 160/130, so the reference costs 0.8125x granian, whose median
    # over the same rounds is 130: 24.4 µs less, read in granian's µs.
    run = cpu_run([90, 100, 110, 100, 110, 120, 130], [100, 110, 120, 130, 140, 150, 160])
    sentence = next(line for line in verdict(summarize(run), ROUTE, None)
                    if "costs less CPU" in line)
    assert sentence.startswith("uvicorn / uvloop / httptools costs less CPU per request "
                               "than granian"), sentence
    assert "0.81x (95 % CI" in sentence and ", 24.4 µs less a request" in sentence
    assert "of 130.0 µs (the median of the same 7 rounds)" in sentence


def test_the_share_of_the_route_names_the_configuration_it_was_read_against() -> None:
    # uvicorn 100 µs a request, granian 80, the app alone 60: the server is at most
    # 40 % of the cost on uvicorn (the dearest) and 25 % on granian.
    run = cpu_run([100] * 7, [80] * 7)
    (sentence,) = [line for line in verdict(summarize(run), ROUTE, app_cost_us=60.0)
                   if line.startswith("The app alone")]
    assert sentence == (
        "The app alone (in-process, no server) costs 60.0 µs CPU per request: the server is "
        "at most 40% of this route's cost on uvicorn / uvloop / httptools, the dearest here "
        "(100.0 µs), and at most 25% on granian / uvloop / hyper, the cheapest (80.0 µs).")
    alone = Run(run.configs[1:], 0, 1.0, 7, [Round([0], {0: r.slices[1]}) for r in run.rounds])
    (sentence,) = [line for line in verdict(summarize(alone), ROUTE, app_cost_us=60.0)
                   if line.startswith("The app alone")]
    assert sentence.endswith("the server is at most 25% of this route's cost on "
                             "granian / uvloop / hyper (80.0 µs)."), sentence


class FakeRounds:
    """Slices for harness.run_rounds without a server: each takes `seconds` of a fake
    clock, and every slice of the rounds numbered in `set_aside` had its core taken."""

    def __init__(self, configs: int, set_aside: set[int], *, seconds: float = 1.0,
                 reason: str = "server core 40% taken (steal)") -> None:
        self.configs, self.set_aside, self.seconds, self.reason = (configs, set_aside,
                                                                   seconds, reason)
        self.now, self.slices = 0.0, 0

    def clock(self) -> float:
        return self.now

    def take_slice(self, index: int) -> Slice:
        number = self.slices // self.configs  # the round this slice belongs to
        self.now, self.slices = self.now + self.seconds, self.slices + 1
        load = drivers.LoadResult("synthetic", 10_000, 1.0, 0, 0, 1.0, 2.0, 3.0)
        return Slice(load, 1.0, set_aside=self.reason if number in self.set_aside else None)


def test_rounds_set_aside_are_told_as_they_happen_with_the_time_it_now_takes() -> None:
    fake = FakeRounds(configs=2, set_aside={2, 3, 4}, seconds=5.0)  # 10 s a round
    run = Run([Config("uvicorn", "uvloop"), Config("granian", "uvloop")], 0, 5.0, 30)
    lines: list[str] = []
    notices = harness.SetAsideNotices(  # 10 s besides the rounds
        say=lines.append, in_all=lambda progress: 10 + progress.seconds_taken
        + progress.seconds_left)
    harness.run_rounds(run, wanted=6, take_slice=fake.take_slice, progress=notices,
                       clock=fake.clock)
    assert (len(run.rounds), len(run.kept)) == (9, 6)
    assert lines == [
        # After 3 rounds, 2 kept: at that pace the 4 still wanted take 6 rounds, 60 s.
        "1 of 3 rounds so far set aside (the server's core was taken away); now about "
        "100 s in all",
        # Not after round 4 (10 s after the first line); after round 5, 2 kept of 5:
        # 10 rounds at that pace, but the cap (12 rounds in all) leaves 7, 70 s.
        "3 of 5 rounds so far set aside (the server's core was taken away); now about "
        "130 s in all"], lines


def test_the_ladder_tells_slices_set_aside_and_whose_core_was_taken() -> None:
    fake = FakeRounds(configs=3, set_aside={0}, reason="driver cores 30% of a core taken")
    run = Run([Config("uvicorn", "uvloop")] * 3, 1, 1.0, 4)
    seen: list[harness.Progress] = []
    lines: list[str] = []
    notices = harness.SetAsideNotices(say=lines.append, in_all=lambda p: p.seconds_left,
                                      per_slice=True, prefix="uvicorn on GET /health/: ")
    harness.run_rounds(run, wanted=4, take_slice=fake.take_slice, counted=ladder_report.
                       pairs_counted, progress=lambda p: (seen.append(p), notices(p)),
                       clock=fake.clock)
    # Round 0 counted for no pair: the whole cap is left, 7 rounds of 3 s.
    assert (seen[0].counted, seen[0].rounds_left, seen[0].seconds_left) == (0, 7, 21.0)
    assert len(run.rounds) == 5
    assert lines == ["uvicorn on GET /health/: 3 of 3 slices so far set aside (the "
                     "driver's cores were taken away); now about 21 s in all"], lines
