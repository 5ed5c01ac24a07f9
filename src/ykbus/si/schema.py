"""JSON Schemas of the wire messages, generated from the msgspec types."""

from __future__ import annotations

import inspect
import json
from typing import Any

import msgspec

from ykbus.si import messages as m


def schemas() -> dict[str, str]:
    """File name -> schema text, one per message type, plus the input and output indexes."""
    out = {}
    for t in m.ALL_MESSAGES:
        schema = _dedented(msgspec.json.schema(t))
        out[f"{t.__name__}.json"] = json.dumps(schema, indent=2, sort_keys=True) + "\n"
    index = {
        "inputs": {kind: f"{t.__name__}.json" for kind, t in m.INPUT_TYPES.items()},
        "outputs": {kind: f"{t.__name__}.json" for kind, t in m.OUTPUT_TYPES.items()},
    }
    out["index.json"] = json.dumps(index, indent=2, sort_keys=True) + "\n"
    return out


def _dedented(schema: Any) -> Any:
    """`schema` with each description (a type's docstring) dedented, as msgspec 0.23 and later
    write it, so that every supported msgspec writes the same schemas."""
    if isinstance(schema, dict):
        return {k: inspect.cleandoc(v) if k == "description" and isinstance(v, str) else _dedented(v)
                for k, v in schema.items()}
    if isinstance(schema, list):
        return [_dedented(v) for v in schema]
    return schema
