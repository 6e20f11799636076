"""The serving layer: what runs the app (app/) on an engine.

- launcher.py: checks where to listen, exports the run's settings, starts the engine.
- engines/: one module per engine, everything about it (engines/__init__.py is the
  contract an engine meets).
- settings.py, setting_specs.py: the server's settings (WEBSERVER_*), declared once.
  Your app's own settings are `AppSettings` in app/custom.py.
- served_app.py: the app as every engine serves it, behind the worker-side ASGI
  wrappers: forwarded.py (proxy headers), probes.py (/livez, /readyz),
  metrics_path.py (/metrics), websockets_off.py.
- drain.py, head_limits.py, metrics_listener.py: what every engine shares on SIGTERM,
  on a request head, and for the metrics of several workers.
"""
