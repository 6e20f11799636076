"""The measuring tool beside the service: `<slug> bench engines` and `<slug> bench app`
(docs/benchmarks.md).

Not part of the service: only the command line imports it (app/core/layers.py), and
only when a bench command runs. command.py is where both commands start.
"""
