"""`bench engines`: the same load at each engine, measured the same way.

route.py      what to request (method, templated path, headers, body)
drivers.py    load generators (wrk, h2load, the bundled Python driver, ab) and their output
pydriver.py   the bundled driver, run as its own process
process_cpu.py  CPU time of a server's process tree, from /proc
app_cost.py   the route's own cost, calling the ASGI app in-process (no sockets)
command.py    the `bench` command line
model.py      configurations, rounds and their figures
harness.py    boots, warm-up, interleaved rounds
verdict.py    the sentence a run ends with
"""
