"""ykbus's web UI: static files (index.html, app.js, topology.js, style.css) served at `/` and
`/ui/` by the HTTP server; the page reads only the JSON API (docs/operations.md, "Web UI")."""

from __future__ import annotations

from importlib import resources

FILES = {"index.html": "text/html; charset=utf-8", "app.js": "text/javascript; charset=utf-8",
         "topology.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}


def asset(name: str) -> tuple[str, bytes] | None:
    """(content type, bytes) of a UI file, None for any other name."""
    kind = FILES.get(name)
    if kind is None:
        return None
    return kind, resources.files(__package__).joinpath(name).read_bytes()
