"""`ykbus config validate`, as a user runs it."""

import json
import subprocess
import sys


def validate(path, *flags):
    return subprocess.run([sys.executable, "-m", "ykbus.cli", "config", "validate", str(path), *flags],
                          capture_output=True, text=True)


def test_valid_configuration(tmp_path):
    f = tmp_path / "queues.yaml"
    f.write_text("partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n        queues:\n          - name: a\n")
    proc = validate(f)
    assert proc.returncode == 0 and "valid" in proc.stdout
    assert json.loads(validate(f, "--json").stdout) == {"file": str(f), "valid": True, "errors": [], "warnings": []}


def test_every_error_with_its_path_and_exit_1(tmp_path):
    f = tmp_path / "queues.yaml"
    f.write_text("partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n"
                 "        resources: {max: {vcore: 1}}\n        queues:\n          - name: a.b\n")
    proc = validate(f)
    assert proc.returncode == 1
    assert "2 errors" in proc.stderr
    assert "partitions[0].queues[0].resources: resources cannot be set on the root queue" in proc.stderr
    assert "partitions[0].queues[0].queues[0].name: queue name 'a.b' contains a dot" in proc.stderr
    out = json.loads(validate(f, "--json").stdout)
    assert out["valid"] is False and len(out["errors"]) == 2


def test_yaml_syntax_error_and_missing_file(tmp_path):
    f = tmp_path / "broken.yaml"
    f.write_text("partitions: [\n")
    proc = validate(f)
    assert proc.returncode == 1 and "not valid YAML" in proc.stderr
    # where and what, on one line, as a person reads it: not PyYAML's snippets, carets and
    # "<unicode string>" flattened onto one line
    f.write_text("partitions:\n  - name: default\n   queues: [\n")
    proc = validate(f)
    assert proc.stderr.splitlines()[-1] == (
        "  not valid YAML: line 3, column 4: did not find expected '-' indicator "
        "(while parsing a block collection from line 2, column 3)")
    proc = validate(tmp_path / "nope.yaml")
    assert proc.returncode == 1 and "cannot read" in proc.stderr


def test_every_example_in_the_configuration_guide_is_valid():
    """The YAML blocks of docs/configuration.md: the service configuration parses, and every
    queue configuration (or queue fragment, put under root) validates."""
    import re
    from pathlib import Path

    from ykbus.bus.permissions import parse_rms_config
    from ykbus.bus.settings import parse_service_config
    from ykbus.configcheck import warnings
    from ykbus.core.config import parse_config
    from ykbus.yamlload import load_yaml

    text = (Path(__file__).parents[1] / "docs" / "configuration.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, re.S)
    assert len(blocks) >= 5
    for block in blocks:
        obj = load_yaml(block)
        if isinstance(obj, dict) and "nats" in obj:
            parse_service_config(obj)
        elif isinstance(obj, dict) and "rms" in obj:  # RMS.yaml of `ykbus nats-config`
            parse_rms_config(obj)
        elif isinstance(obj, dict) and "partitions" in obj:
            assert warnings(parse_config(obj)) == [], block
        elif isinstance(obj, dict) and "placementrules" in obj:
            parse_config({"partitions": [{"name": "default", **obj, "queues": [
                {"name": "root", "submitacl": "*", "queues": [{"name": "users", "parent": True},
                                                              {"name": "groups", "parent": True}]}]}]})
        else:  # a queue fragment
            assert warnings(parse_config({"partitions": [{"name": "default", "queues": [
                {"name": "root", "submitacl": "*", "queues": obj}]}]})) == [], block


def test_service_configuration_is_validated_with_service(tmp_path):
    f = tmp_path / "ykbus.yaml"
    f.write_text("nats: {url: 'nats://127.0.0.1:4222'}\nscheduler_acl: 'ops admins'\n")
    assert validate(f, "--service").returncode == 0
    f.write_text("nats: {url: 'nats://127.0.0.1:4222', tsl: {}}\n")
    out = json.loads(validate(f, "--service", "--json").stdout)
    assert out == {"file": str(f), "valid": False, "errors": ["Object contains unknown field `tsl` - at `$.nats`"],
                   "warnings": []}


def test_a_reader_is_chosen_in_the_file_or_by_flag_and_must_answer_reads(tmp_path):
    from argparse import Namespace

    import pytest

    from ykbus.bus.settings import StartError, service_settings

    f = tmp_path / "ykbus.yaml"
    f.write_text("role: reader\n")
    s = service_settings(Namespace(config=str(f)))
    assert s.reader and s.reads
    assert service_settings(Namespace(reader=True)).reader
    assert not service_settings(Namespace(no_reads=True)).reads
    assert not service_settings(Namespace()).reader and service_settings(Namespace()).reads
    with pytest.raises(StartError, match="--reader with --no-reads"):
        service_settings(Namespace(config=str(f), no_reads=True))
    f.write_text("role: standby\n")
    out = json.loads(validate(f, "--service", "--json").stdout)
    assert out["valid"] is False and "$.role" in out["errors"][0]


def test_a_key_given_twice_is_an_error_not_the_last_one_silently(tmp_path):
    """Regression: a second `properties:` in one queue replaced the first (its fence was gone)
    and the file read as valid. YAML says a mapping's keys are unique; a merge (`<<:`) may
    still be overridden by a key of its own."""
    f = tmp_path / "queues.yaml"
    f.write_text("partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n"
                 "        queues:\n          - name: tenant\n            properties: {priority.policy: fence}\n"
                 "            maxapplications: 5\n            properties: {application.sort.policy: fair}\n")
    proc = validate(f)
    assert proc.returncode == 1 and "key 'properties' is given twice (lines 8 and 10)" in proc.stderr, proc.stderr
    f.write_text("base: &b {name: a, maxapplications: 2}\npartitions:\n  - name: default\n    queues:\n"
                 "      - name: root\n        submitacl: '*'\n        queues:\n          - <<: *b\n"
                 "            maxapplications: 3\n")
    proc = validate(f)
    assert "given twice" not in proc.stderr, proc.stderr


def test_a_name_that_yaml_reads_as_a_number_or_a_boolean_is_told_to_be_quoted(tmp_path):
    """Regression: `name: 2024` and `name: off` read "missing queue name"."""
    f = tmp_path / "queues.yaml"
    f.write_text("partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n"
                 "        queues:\n          - name: 2024\n          - name: off\n")
    proc = validate(f)
    assert proc.returncode == 1
    assert "partitions[0].queues[0].queues[0].name: 2024 is a number in YAML: quote it ('2024') to name a queue" \
        in proc.stderr, proc.stderr
    assert "partitions[0].queues[0].queues[1].name: False is a boolean in YAML: quote the name ('off', say)" \
        in proc.stderr, proc.stderr
    assert "missing" not in proc.stderr and "duplicate" not in proc.stderr, proc.stderr


def test_an_empty_policy_is_its_default_and_an_offset_is_read_as_go_reads_an_int32():
    """The priority scheduling design: "If no policy is set the value `default` is used";
    `priority.offset` is `strconv.ParseInt(s, 10, 32)`, 0 when that fails (regression:
    `1_000` and Arabic-Indic digits read as 1000 and 100)."""
    from ykbus.core.config import parse_offset

    assert [parse_offset(t) for t in ("100", "-5", "+7", "1_000", "١٠٠", "abc", "", "2147483648", " 5")] == [
        100, -5, 7, 0, 0, 0, 0, 0, 0]


def test_a_policy_left_empty_validates(tmp_path):
    f = tmp_path / "queues.yaml"
    f.write_text("partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n"
                 "        queues:\n          - name: a\n            properties: {priority.policy: '', "
                 "application.sort.policy: ''}\n          - name: b\n"
                 "            properties: {application.sort.priority: yes}\n")
    proc = validate(f)
    assert "queues[0].properties" not in proc.stderr, proc.stderr
    assert ("partitions[0].queues[0].queues[1].properties.application.sort.priority: unknown value 'true': "
            "expected one of enabled, disabled (YAML reads an unquoted yes, no, on, off, true or false as a "
            "boolean)") in proc.stderr, proc.stderr


def test_a_limit_of_applications_with_empty_maxresources_is_valid(tmp_path):
    """As YuniKorn reads it (an empty map: no resource limit) and as docs/configuration.md
    says (maxresources or maxapplications); regression: "maxresources: sets no resource above zero"."""
    f = tmp_path / "queues.yaml"
    f.write_text("partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n"
                 "        queues:\n          - name: a\n            limits:\n"
                 "              - {limit: one, users: [bob], maxapplications: 1, maxresources: {}}\n"
                 "              - {limit: none, users: [eve], maxresources: {}}\n")
    proc = validate(f)
    assert proc.returncode == 1 and "1 error" in proc.stderr, proc.stderr
    assert "limits[1]: a limit needs maxresources or maxapplications" in proc.stderr, proc.stderr


def test_keys_are_compared_as_values_and_an_anchor_merged_elsewhere_is_no_duplicate():
    """Review of the duplicate-key check: a mapping merged elsewhere (`<<: *x`) was flattened
    before its own check and read as a key given twice; `1` and `'1'` are two keys, `true`
    and `yes` one."""
    import pytest

    from ykbus.yamlload import load_yaml

    assert load_yaml("a:\n  b:\n    x: &x\n      <<: {k: 1}\n      k: 2\nc:\n  <<: *x\n")["a"]["b"]["x"] == {"k": 2}
    assert load_yaml("{1: a, '1': b}") == {1: "a", "1": "b"}
    with pytest.raises(ValueError, match="key 'yes' is given twice"):
        load_yaml("{true: a, yes: b}")
    with pytest.raises(ValueError, match="key '1' is given twice"):  # (one key of the loaded dict)
        load_yaml("{true: a, 1: b}")


def test_a_second_document_cannot_slip_an_alias_bomb_past_the_node_bound():
    """Review: the bound counted nodes by id(); a document's nodes freed, the next document's
    reused their ids and counted as single nodes: a second document of nested aliases (47 MB
    from 1 KB) was taken where it alone is refused."""
    import pytest

    from ykbus.yamlload import load_yaml_documents

    bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]\n" for i in range(1, 7))
    for text in (bomb, "a: 1\n---\n" + bomb, "a: [1, 2, 3]\n---\nb: {c: 1}\n---\n" + bomb):
        with pytest.raises(ValueError, match="YAML_NODES"):
            load_yaml_documents(text)


def test_a_property_nothing_reads_and_an_offset_that_counts_as_0_are_warned_of(tmp_path):
    """Outside reviews: `application.sort.polcy: fair` and `priority.offset: "1O0"` (a typo
    that takes a queue's boost away) validated silently; YuniKorn takes both too, so they are
    warnings, the file still valid."""
    f = tmp_path / "queues.yaml"
    f.write_text("partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n"
                 "        queues:\n          - name: a\n            properties: {application.sort.polcy: fair, "
                 "priority.offset: '1O0', team.owner: ml}\n          - name: b\n"
                 "            properties: {priority.offset: '-5', application.sort.policy: fifo}\n")
    proc = validate(f)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"{f}: valid",
        "  warning: partition default, queue root.a: property 'application.sort.polcy' is not one ykbus reads "
        "(did you mean application.sort.policy?)",
        "  warning: partition default, queue root.a: priority.offset '1O0' is not an int32: it counts as 0",
        "  warning: partition default, queue root.a: property 'team.owner' is not one ykbus reads (kept, acted on "
        "by nothing)"]
    assert len(json.loads(validate(f, "--json").stdout)["warnings"]) == 3
    # an offset of 0 however written is one, not a warning (regression: "00" and "-00" were)
    f.write_text("partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: '*'\n"
                 "        queues:\n          - name: a\n            properties: {priority.offset: '00'}\n"
                 "          - name: b\n            properties: {priority.offset: '-00'}\n")
    assert validate(f).stdout.splitlines() == [f"{f}: valid"]
