"""RMS.yaml validation and the nats-server configuration `ykbus nats-config` writes (no
server here: tests/integration/test_permissions.py runs it in a real nats-server)."""

from __future__ import annotations

import os
import re
import stat

import pytest

from ykbus.bus.permissions import (
    RmsConfigError,
    encode_user_nkey,
    generate,
    nkey_error,
    parse_rms_config,
    server_config,
    with_passwords,
)
from ykbus.cli import main

NKEY = encode_user_nkey(bytes(range(32)))


def errors_of(obj) -> list[str]:
    with pytest.raises(RmsConfigError) as exc:
        parse_rms_config(obj)
    return exc.value.errors


def test_every_error_is_listed_with_its_path():
    assert errors_of({"prefix": "yk.*", "rms": [
        {"id": "a.b"}, {"id": "_core"}, {"id": "ok", "password": "x", "nkey": NKEY}, {"id": "ok"},
        {"id": "n", "nkey": "UABC"}, {"id": "e", "password": ""}], "admins": [{"user": "n"}]}) == [
        "$.prefix: 'yk.*': expected dot-separated tokens of letters, digits, _ and -",
        "$.rms[0].id: 'a.b': expected 1 to 64 letters, digits, _ or - (a NATS user and subject token)",
        "$.rms[1].id: '_core' is reserved for the core's own log entries",
        "$.rms[2]: give a password or an nkey, not both",
        "$.rms[3].id: 'ok' is already used at $.rms[2].id: every identity needs its own name",
        "$.rms[4].nkey: expected a user nkey public key: 56 characters starting with U",
        "$.rms[5].password: empty (omit it to have one generated)",
        "$.admins[0].user: 'n' is already used at $.rms[4].id: every identity needs its own name",
    ]


def test_types_and_unknown_keys_are_errors_naming_the_path():
    assert errors_of({"rms": [{"id": "a", "pasword": "x"}]}) == ["Object contains unknown field `pasword` - at `$.rms[0]`"]
    assert errors_of({"rms": [{"password": "x"}]}) == ["Object missing required field `id` - at `$.rms[0]`"]
    assert errors_of({"admins": "ops"}) == ["Expected `array`, got `str` - at `$.admins`"]


def test_nkeys_are_checked():
    assert nkey_error(NKEY) is None
    assert nkey_error(NKEY[:-1] + ("A" if NKEY[-1] != "A" else "B")) in ("bad checksum", "not base32")
    assert nkey_error("S" + NKEY[1:]) == "expected a user nkey public key: 56 characters starting with U"


def allow_lists(text: str, user: str) -> tuple[list[str], list[str], bool]:
    line = next(block for block in text.split("\n    {") if f'user: "{user}"' in block or f'nkey: "{user}"' in block)
    pub = re.search(r"publish: \{allow: \[(.*?)\]\}", line).group(1)
    sub = re.search(r"subscribe: \{allow: \[(.*?)\]\}", line).group(1)
    return ([p.strip().strip('"') for p in pub.split(",")], [s.strip().strip('"') for s in sub.split(",")],
            "allow_responses: true" in line)


def test_each_identity_gets_only_its_own_subjects():
    config = with_passwords(parse_rms_config({
        "prefix": "yk.v2", "rms": [{"id": "k8s"}, {"id": "batch", "nkey": NKEY}],
        "admins": [{"user": "ops"}], "observers": [{"user": "grafana"}]}), generate=lambda: "pw")
    text = server_config(config, hash_password=lambda p: f"hash({p})")
    assert text.count('password: "hash(pw)"') == 4 and '"pw"' not in text
    assert allow_lists(text, "k8s") == ([
        "yk.v2.in.k8s.>", "yk.v2.hb.k8s", "yk.v2.attach.k8s", "$JS.API.CONSUMER.MSG.NEXT.YK_OUT.rm_k8s",
        "$JS.ACK.YK_OUT.rm_k8s.>", "$JS.ACK.*.*.YK_OUT.rm_k8s.>"], ["_INBOX_k8s.>"], False)
    assert allow_lists(text, NKEY)[1] == ["_INBOX_batch.>"]
    assert allow_lists(text, "ops") == (["yk.v2.admin.ops.>", "yk.v2.api.>"], ["_INBOX_ops.>"], False)
    assert allow_lists(text, "grafana") == (["yk.v2.api.>"], ["_INBOX_grafana.>"], False)
    assert allow_lists(text, "ykbus-core") == (["yk.v2.>", "$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$O.YK_SNAP.>",
                                                "$KV.YK_LEASE.>", "$KV.YK_SHARDS.>"], ["yk.v2.>", "_INBOX.>"], True)


def test_without_a_password_or_nkey_there_is_no_configuration():
    with pytest.raises(ValueError, match="ykbus-core: no password and no nkey"):
        server_config(parse_rms_config({}))


def test_the_command_writes_owner_only_files_and_refuses_to_lose_generated_passwords(tmp_path, capsys):
    rms = tmp_path / "rms.yaml"
    rms.write_text("rms: [{id: a}]\n")
    out = tmp_path / "nats.conf"
    assert main(["nats-config", "--rms", str(rms), "--out", str(out)]) == 1
    assert "passwords would be generated but --secrets is not given" in capsys.readouterr().err
    assert not out.exists()
    assert main(["nats-config", "--rms", str(rms), "--out", str(out), "--secrets", str(tmp_path / "s.yaml")]) == 0
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    rms.write_text("rms: [{id: a.b}, {id: c, nkey: x}]\n")
    assert main(["nats-config", "--rms", str(rms), "--out", str(out)]) == 1
    assert capsys.readouterr().err.splitlines()[-3:] == [
        f"ykbus nats-config: {rms}: 2 errors",
        "  $.rms[0].id: 'a.b': expected 1 to 64 letters, digits, _ or - (a NATS user and subject token)",
        "  $.rms[1].nkey: expected a user nkey public key: 56 characters starting with U"]


def test_given_passwords_and_nkeys_need_no_secrets_file(tmp_path):
    config = parse_rms_config({"core": {"password": "c"}, "rms": [{"id": "a", "nkey": NKEY}]})
    done = generate(config, str(tmp_path / "nats.conf"), None)
    assert done.files == [str(tmp_path / "nats.conf")]


def test_a_kv_bucket_grant_adds_that_buckets_subjects_and_stream_api_only():
    config = with_passwords(parse_rms_config({
        "rms": [{"id": "tyjob", "buckets": ["ykbus-tyjob"]}, {"id": "k8s"}],
        "admins": [{"user": "ops", "buckets": ["ykbus-tyjob"]}]}), generate=lambda: "pw")
    text = server_config(config, hash_password=lambda p: f"hash({p})")
    granted = allow_lists(text, "tyjob")[0]
    assert "$KV.ykbus-tyjob.>" in granted and "$JS.API.STREAM.INFO.KV_ykbus-tyjob" in granted
    assert all("KV" not in p or "ykbus-tyjob" in p for p in granted)  # no other bucket, no wildcard stream API
    assert not any(p.startswith("$JS.API.STREAM.INFO.YK") or p == "$JS.API.>" for p in granted)
    assert "$KV.ykbus-tyjob.>" in allow_lists(text, "ops")[0]
    assert not any("KV" in p for p in allow_lists(text, "k8s")[0])


def test_a_bucket_name_that_is_not_a_token_is_an_error_naming_its_path():
    assert errors_of({"rms": [{"id": "a", "buckets": ["ok", "b.>"]}], "admins": [{"user": "u", "buckets": [""]}]}) == [
        "$.rms[0].buckets[1]: 'b.>': expected 1 to 64 letters, digits, _ or - (a KV bucket)",
        "$.admins[0].buckets[0]: '': expected 1 to 64 letters, digits, _ or - (a KV bucket)"]
