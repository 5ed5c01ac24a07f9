"""Fuzz YuniKorn's REST API (issue 23): any method, path, query and body, over a core that
holds a real state (the preemption example's log), answers as YuniKorn's router does and
never fails: a status from the router's set, JSON that parses when the type says JSON, an
error body with YuniKorn's three fields, nothing raised. Paths are built from the real
routes and then mutated (ids that exist and that do not, odd characters, encodings, extra
segments, trailing slashes), and include the events and metrics paths."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.profile import FUZZ
from ykbus.log.jsonl import read_entries
from ykbus.log.replay import guarded_core
from ykbus.rest import router
from ykbus.rest.router import Request, RestState

ROOT = Path(__file__).resolve().parents[2]
_guard = guarded_core(None)
for _entry in read_entries((ROOT / "examples" / "preemption.jsonl").read_bytes().splitlines(), "preemption.jsonl"):
    list(_guard.apply(_entry))
STATE = RestState(lambda: _guard.core, 1)
_part = next(p for rm in _guard.core.rms.values() for p in rm.partitions.values())
IDS = [_part.name, *list(_part.queues), *list(_part.apps), *list(_part.nodes), "nope", "", "root.a b", "%5Bx%5D",
       "[k8s]default", "x" * 300, "..", "\u00e9", "a/b", "root." * 30]
TEMPLATES = [route[0].pattern for route in router.ROUTES] + list(router.MOVED) + list(router.EXTERNAL) + [
    "/", "/ws/v1", "/debug", "/api/health"]
SEGMENT = st.sampled_from(IDS) | st.text(min_size=0, max_size=12)
QUERY = st.dictionaries(st.sampled_from(["status", "subtree", "count", "start", "allocations", "x", ""]),
                        st.sampled_from(["", "running", "RUNNING", "bogus", "0", "-1", "3", "99999999999999999999",
                                         "false", "\x00", "completing"]) | st.text(max_size=8), max_size=4)
STATUSES = {200, 301, 307, 400, 404, 405}


def path_of(template: str, draw_segment) -> str:
    out = template
    for group in ("(?P<part>[^/]+)", "(?P<name>[^/]+)", "(?P<state>[^/]+)", "(?P<app_id>[^/]+)",
                  "(?P<node_id>[^/]+)"):
        while group in out:
            out = out.replace(group, draw_segment(), 1)
    return out


@FUZZ
@given(data=st.data(), method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "OPTIONS", "HEAD", "PATCH"]),
       template=st.sampled_from(TEMPLATES), query=QUERY, body=st.binary(max_size=300),
       tail=st.sampled_from(["", "/", "//", "/x", "?"]))
def test_any_request_gets_a_routers_answer_and_never_fails(data, method, template, query, body, tail):
    path = path_of(template, lambda: data.draw(SEGMENT)) + tail
    status, content_type, payload, headers = router.answer(STATE, Request(method, path, query, "", body))
    assert status in STATUSES, (method, path, status)
    if status == 405:
        assert "Allow" in headers
    if status in (301, 307):
        assert headers["Location"].startswith("/")
    if content_type.startswith("application/json"):
        answer = json.loads(payload)
        if status >= 400:
            assert set(answer) == {"status_code", "message", "description"} and answer["status_code"] == status
        assert headers.get("Access-Control-Allow-Origin") == "*"
