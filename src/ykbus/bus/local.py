"""Where a command finds the NATS server when it is not told: `$YKBUS_NATS`, else the URL
a running `ykbus up` wrote to `~/.ykbus/nats.url`, else `nats://127.0.0.1:4222`."""

from __future__ import annotations

import os

DEFAULT_URL = "nats://127.0.0.1:4222"
URL_FILE = os.path.join("~", ".ykbus", "nats.url")  # written by `ykbus up` while it runs


def default_url() -> str:
    env = os.environ.get("YKBUS_NATS")
    if env:
        return env
    try:
        with open(os.path.expanduser(URL_FILE), encoding="utf-8") as f:
            url = f.read().strip()
            if url:
                return url
    except OSError:
        pass
    return DEFAULT_URL
