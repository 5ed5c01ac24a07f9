"""The YAML loader every configuration, manifest and cluster file goes through
(src/ykbus/yamlload.py), fuzzed: any text loads or is a ValueError naming why, and a mapping
whose keys load to the same dict key twice is refused, whatever their spelling."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ykbus.yamlload import load_yaml, load_yaml_documents

# spellings of scalar keys, several of which load to one dict key (1, 1.0, true, yes; null, ~)
KEYS = ["a", "b", "'a'", "1", "'1'", "1.0", "true", "yes", "on", "false", "0", "null", "~", "x.y"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(KEYS), min_size=1, max_size=6), st.booleans())
def test_a_key_given_twice_is_refused_exactly_when_the_dict_would_drop_one(keys, block):
    text = ("\n".join(f"{k}: {i}" for i, k in enumerate(keys)) + "\n") if block else \
        "{" + ", ".join(f"{k}: {i}" for i, k in enumerate(keys)) + "}"
    loaded = [yaml.safe_load(k) for k in keys]
    unique = len({*loaded}) == len(loaded)
    if unique:
        assert len(load_yaml(text)) == len(keys)
    else:
        with pytest.raises(ValueError, match="is given twice"):
            load_yaml(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("ab:{}[],-&*<\n '\"!?|>#%@`1") + ["<<: ", "&x ", "*x", "---\n", "a: "]),
                max_size=40).map("".join))
def test_any_text_loads_or_is_a_value_error(text):
    for load in (load_yaml, load_yaml_documents):
        try:
            load(text)
        except ValueError:
            pass


def test_the_text_is_read_by_libyaml_and_composed_within_the_bounds():
    """The writer reads an RM's queue configuration as it applies its entry, holding every
    other entry: the text is parsed by libyaml (about 8x faster than PyYAML's parser in Python
    on a 1 MiB file), and composed here, where depth, aliases and expanded size are counted."""
    import ykbus.yamlload as loader

    assert yaml.__with_libyaml__, "PyYAML's wheels carry libyaml: the writer would read configurations 8x slower"
    assert loader._Events is yaml._yaml.CParser
    for text, bound in [("a:\n" + "".join(" " * (i + 1) + "a:\n" for i in range(100)), "limit DEPTH"),
                        ("- " * 1000 + "x", "limit DEPTH"),
                        ("[" * 100_000, "nesting depth"),  # libyaml's own bound on flow levels, first
                        ("a: &a [" + "x, " * 1000 + "]\nb: &b [" + "*a, " * 50 + "]\nc: [" + "*b, " * 40 + "]\n",
                         "limit YAML_NODES")]:
        with pytest.raises(ValueError, match=bound):
            load_yaml(text)
    # what a person reads of a syntax error: where, what, on one line
    with pytest.raises(ValueError, match=r"^line 3, column 4: did not find expected '-' indicator"):
        load_yaml("partitions:\n  - name: default\n   queues: [\n")
