"""What `jobman ui` and `stado ui` share: the local web server (binding, the per-launch token, the security
headers, stopping on Ctrl-C or SIGTERM), server-sent events of changes, and the static files both pages use
(common.js, common.css, the vendored dagre).

Imported only by the `ui` commands: Starlette and uvicorn (the `ui` extra) are never loaded by `jobman run`,
the supervisor or `stado submit` (tests/test_layering.py keeps it so).
"""
