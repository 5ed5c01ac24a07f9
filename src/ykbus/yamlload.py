"""The YAML loader the shell hands to the core (the core imports no YAML library).

Bounded before anything is built (`ykbus.limits`): the text's size, the number of aliases
(`*name`), and the number of nodes the document has once every alias is expanded, so that
a few hundred bytes of nested aliases (a "billion laughs") are refused instead of
becoming gigabytes. Nesting depth is bounded too. Each bound is named in the error.

The text is read by libyaml (PyYAML's C parser, in its wheels) into events, and composed
into nodes here, in Python, where the bounds are counted: libyaml's own composer would
compose out of reach of the counts (and recursively, in C). A queue file near the 1 MiB
limit is read in about 0.5 s this way, against 4 s with PyYAML's parser in Python: the
writer reads an RM's configuration when it applies its entry, and holds every entry
meanwhile. Without libyaml (a PyYAML built from source without it; its wheels carry it)
PyYAML's parser in Python reads the text: it words its errors otherwise, refuses a few texts
libyaml takes (a tab inside a plain scalar) and takes a few it refuses (`%YAML 1.3`), so a
replay of a log holding such a configuration could differ between the two (docs/protocol.md).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from ykbus import limits
from ykbus.core.config import SchedulerConfig, parse_config

if yaml.__with_libyaml__:
    from yaml._yaml import CParser as _Events
else:  # pragma: no cover - PyYAML's wheels carry libyaml; without it, its Python parser
    from yaml.parser import Parser as YamlParser
    from yaml.reader import Reader as YamlReader
    from yaml.scanner import Scanner as YamlScanner

    class _Events(YamlReader, YamlScanner, YamlParser):  # type: ignore[no-redef]
        def __init__(self, stream: str) -> None:
            YamlReader.__init__(self, stream)
            YamlScanner.__init__(self)
            YamlParser.__init__(self)


class _BoundedLoader(Composer, _Events, SafeConstructor, Resolver):
    """A safe loader that counts, while composing, what the document would expand to: the
    parser's events (`_Events`), composed by PyYAML's `Composer` ahead of the parser's own."""

    def __init__(self, stream: str) -> None:
        _Events.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._aliases = 0
        self._depth = 0
        # node -> nodes in it, aliases expanded (keyed by the node itself, so kept alive for the
        # whole text: keyed by its id, a freed document's ids were reused by the next one's nodes)
        self._sizes: dict[Node, int] = {}

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > limits.MAX_YAML_ALIASES:
                raise yaml.YAMLError(f"more than {limits.MAX_YAML_ALIASES} aliases (limit YAML_ALIASES)")
            target = self.anchors.get(self.peek_event().anchor)
            if target is not None and target not in self._sizes:
                raise yaml.YAMLError(f"alias *{self.peek_event().anchor} refers to a node that contains it")
        self._depth += 1
        try:
            if self._depth > limits.MAX_DEPTH:
                raise yaml.YAMLError(f"nested deeper than {limits.MAX_DEPTH} (limit DEPTH)")
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if self._size(node) > limits.MAX_YAML_NODES:
            raise yaml.YAMLError(f"more than {limits.MAX_YAML_NODES} nodes once aliases are expanded "
                                 "(limit YAML_NODES)")
        return node

    def compose_mapping_node(self, anchor: str | None) -> MappingNode:
        node = super().compose_mapping_node(anchor)
        self._unique_keys(node)  # (once, as composed: an alias returns the node, not through here)
        return node

    def _unique_keys(self, node: MappingNode) -> None:
        """A mapping's keys are unique, as YAML says (PyYAML keeps the last of two silently:
        a second `properties:` replaced the first). Checked as composed, before a merge
        (`<<: *base`) is flattened into the mapping (a key of its own overrides a merged one),
        keys compared as the loaded dict compares them (`1` and `'1'` differ; `yes`, `true`
        and `1` do not)."""
        seen: dict[Any, int] = {}
        for key, _ in node.value:
            if not isinstance(key, ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                continue
            construct = self.yaml_constructors.get(key.tag)
            value = construct(self, key) if construct is not None else key.value
            line = key.start_mark.line + 1
            first = seen.get(value)  # (as the loaded dict keys it: `true`, `1` and `1.0` are one key)
            if first is not None:
                raise yaml.YAMLError(f"key {limits.quoted(key.value)} is given twice (lines {first} and {line}): "
                                     "the second would silently replace the first")
            seen[value] = line

    def _size(self, node: Node) -> int:
        known = self._sizes.get(node)
        if known is not None:
            return known  # an alias, or a node already counted: its whole expanded size
        if isinstance(node, SequenceNode):
            size = 1 + sum(self._sizes.get(c, 1) for c in node.value)
        elif isinstance(node, MappingNode):
            size = 1 + sum(self._sizes.get(k, 1) + self._sizes.get(v, 1) for k, v in node.value)
        else:
            size = 1
        self._sizes[node] = size
        return size


def _said(exc: yaml.MarkedYAMLError) -> str:
    """The parser's error on one line, as a person reads it: where, what, and what it was
    reading (`line 3, column 4: expected <block end>, but found '<block mapping start>' (while
    parsing a block collection from line 2, column 3)`), without PyYAML's snippets and carets."""
    def at(mark: Any) -> str:
        return f"line {mark.line + 1}, column {mark.column + 1}"

    where = f"{at(exc.problem_mark)}: " if exc.problem_mark is not None else ""
    said = f"{where}{exc.problem or exc.context or 'not YAML'}"
    if exc.context and exc.problem:
        said += f" ({exc.context}" + (f" from {at(exc.context_mark)}" if exc.context_mark is not None else "") + ")"
    return said


def _load(text: str, every_document: bool) -> Any:
    if len(text) > limits.MAX_CONFIG_BYTES:
        raise ValueError(f"{len(text)} characters, over the limit of {limits.MAX_CONFIG_BYTES} (limit CONFIG_BYTES)")
    loader = None
    try:
        loader = _BoundedLoader(text)
        if not every_document:
            return loader.get_single_data()
        docs = []
        while loader.check_node():
            docs.append(loader.construct_document(loader.get_node()))
        return docs
    except yaml.MarkedYAMLError as exc:
        raise ValueError(_said(exc)) from None
    except yaml.YAMLError as exc:
        raise ValueError(str(exc).replace("\n", " ")) from None
    except RecursionError:
        raise ValueError(f"nested deeper than {limits.MAX_DEPTH} (limit DEPTH)") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml(text: str) -> Any:
    """Plain objects from YAML text; ValueError with the parser's message if it is not YAML
    or is past a bound."""
    return _load(text, every_document=False)


def load_yaml_documents(text: str) -> list[Any]:
    """Every document of a multi-document YAML text (`---` between them), under the same
    bounds as `load_yaml` (counted over the whole text); ValueError says why not."""
    return _load(text, every_document=True)


def load_config_file(path: str) -> SchedulerConfig:
    """Parse and validate a queues.yaml file (ConfigError lists every problem)."""
    with open(path, encoding="utf-8") as f:
        return parse_config(load_yaml(f.read()))
