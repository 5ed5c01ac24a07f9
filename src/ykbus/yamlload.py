"""The YAML loader the shell hands to the core (the core imports no YAML library)."""

from __future__ import annotations

from typing import Any

import yaml

from ykbus.core.config import SchedulerConfig, parse_config


def load_yaml(text: str) -> Any:
    """Plain objects from YAML text; ValueError with the parser's message if it is not YAML."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(str(exc).replace("\n", " ")) from None


def load_config_file(path: str) -> SchedulerConfig:
    """Parse and validate a queues.yaml file (ConfigError lists every problem)."""
    with open(path, encoding="utf-8") as f:
        return parse_config(load_yaml(f.read()))
