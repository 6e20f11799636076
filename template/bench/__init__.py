"""The measuring tool beside the service: `<slug> bench engines` and `<slug> bench app`.

Not part of the service: `app/` never imports it, and the command line loads it only
when a bench command runs.

command.py    the `bench` command line
route.py      what to request (method, templated path, headers, body)
drivers.py    load generators (wrk, h2load, the bundled Python driver, ab) and their output
pydriver.py   the bundled driver, run as its own process
http1.py      one HTTP/1.1 response reader (Content-Length, chunked, to the close)
harness.py    boots, warm-up, rounds of short slices taken in turn
machine.py    from /proc: CPU time of a server's process tree; steal and other processes
              on the server's and the driver's cores, which set a round aside
model.py      configurations, slices, rounds and their figures
stats.py      medians, bootstrap confidence intervals, and the call an interval supports
verdict.py    what a run says, in sentences
report.py     the table, the warnings and the JSON
app_cost.py   the route's own cost, calling the ASGI app in-process (no sockets)
app_overhead.py, user_like.py   `bench app`: this app's layers against bare FastAPI
ladder.py     `bench app --ladder`: the rungs, from raw ASGI to the app as served
ladder_serve.py   the launcher serving one rung (python -m bench.ladder_serve serve ...)
ladder_command.py, ladder_report.py   the climbs, in-process and per engine; their tables
"""
