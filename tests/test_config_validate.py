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
    assert json.loads(validate(f, "--json").stdout) == {"file": str(f), "valid": True, "errors": []}


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
    proc = validate(tmp_path / "nope.yaml")
    assert proc.returncode == 1 and "cannot read" in proc.stderr


def test_every_example_in_the_configuration_guide_is_valid():
    """The YAML blocks of docs/configuration.md: the service configuration parses, and every
    queue configuration (or queue fragment, put under root) validates."""
    import re
    from pathlib import Path

    from ykbus.bus.permissions import parse_rms_config
    from ykbus.bus.settings import parse_service_config
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
            parse_config(obj)
        elif isinstance(obj, dict) and "placementrules" in obj:
            parse_config({"partitions": [{"name": "default", **obj, "queues": [
                {"name": "root", "submitacl": "*", "queues": [{"name": "users", "parent": True},
                                                              {"name": "groups", "parent": True}]}]}]})
        else:  # a queue fragment
            parse_config({"partitions": [{"name": "default", "queues": [
                {"name": "root", "submitacl": "*", "queues": obj}]}]})


def test_service_configuration_is_validated_with_service(tmp_path):
    f = tmp_path / "ykbus.yaml"
    f.write_text("nats: {url: 'nats://127.0.0.1:4222'}\nscheduler_acl: 'ops admins'\n")
    assert validate(f, "--service").returncode == 0
    f.write_text("nats: {url: 'nats://127.0.0.1:4222', tsl: {}}\n")
    out = json.loads(validate(f, "--service", "--json").stdout)
    assert out == {"file": str(f), "valid": False, "errors": ["Object contains unknown field `tsl` - at `$.nats`"]}


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
