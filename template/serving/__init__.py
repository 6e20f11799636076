"""The serving layer: what runs the app on an engine (docs/architecture.md).

launcher.py checks where to listen, exports the run's settings and starts the engine;
engines/ has one module or package per engine (engines/__init__.py is the contract);
served_app.py is the app as every engine serves it. The rest is what every engine
shares (the drain on SIGTERM, the head limits, reloads, the metrics listener). The
request layers are the app's (app/middleware/), the settings the base's (app/core/).
"""
