"""`ykbus config validate`: a queue file (or a service configuration) read as the core reads
it, every error with its path; and, for a queue file that is valid, warnings of what the core
takes but will not act on: a property no part of ykbus reads (a typo, most often: YuniKorn
takes any property too) and a `priority.offset` that counts as 0 (YuniKorn's design reads an
offset that is not an int32 as 0).
"""

from __future__ import annotations

import difflib
from typing import Any

from ykbus.core import config as c


def validate_file(path: str, service: bool) -> tuple[list[str], list[str]]:
    """(errors, warnings) of the file at `path`: a queue file, or a service configuration."""
    from ykbus.bus.settings import ServiceConfigError, parse_service_config
    from ykbus.yamlload import load_yaml

    try:
        with open(path, encoding="utf-8") as f:
            obj = load_yaml(f.read())
        if service:
            parse_service_config(obj)
            return [], []
        return [], warnings(c.parse_config(obj))
    except ServiceConfigError as exc:
        return [str(exc)], []
    except c.ConfigError as exc:
        return exc.errors, []
    except ValueError as exc:
        return [f"not valid YAML: {exc}"], []
    except OSError as exc:
        return [f"cannot read: {exc.strerror}"], []


def warnings(config: c.SchedulerConfig) -> list[str]:
    """What a valid configuration sets that the core will not act on, queue by queue."""
    out: list[str] = []
    for p in config.partitions:
        stack: list[tuple[Any, str]] = [(p.root, c.ROOT)]
        while stack:
            q, at = stack.pop(0)
            where = f"partition {p.name}, queue {at}"
            out += _properties(q.properties, where)
            if q.childtemplate is not None:
                out += _properties(q.childtemplate.properties, f"{where}, child template")
            stack += [(child, f"{at}.{child.name.lower()}") for child in q.queues]
    return out


def _properties(props: dict[str, str], where: str) -> list[str]:
    out = []
    for key, value in sorted(props.items()):
        if key not in c.PROPERTIES:
            near = difflib.get_close_matches(key, c.PROPERTIES, n=1, cutoff=0.8)
            out.append(f"{where}: property {key!r} is not one ykbus reads"
                       + (f" (did you mean {near[0]}?)" if near else " (kept, acted on by nothing)"))
        elif key == c.PROP_PRIORITY_OFFSET and value and c.offset_of(value) is None:
            out.append(f"{where}: {key} {value!r} is not an int32: it counts as 0")
    return out
