"""ykbus: a YuniKorn-style scheduler core that resource managers talk to over NATS."""

import os as _os

__version__ = "0.1.0"

# Settings of `ykbus.limits` from the environment (YKBUS_LIMIT_<NAME>), read here, at the
# first import of the package, because the sans-IO core may not read the environment itself.
LIMIT_OVERRIDES: dict[str, str] = {
    k[len("YKBUS_LIMIT_"):]: v for k, v in _os.environ.items() if k.startswith("YKBUS_LIMIT_")
}
