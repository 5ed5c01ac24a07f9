import os
import shutil
import tempfile

import pytest

from ykbus.core import Core, nodefinder, partition
from ykbus.log.build import LogBuilder
from ykbus.yamlload import load_yaml

# Every test's pass checks that an ask judged behind a gate finds, among the nodes that opened
# it, the node a walk of every node finds (core/nodefinder.py `first_fit`), and that the
# reservation candidates kept across node moves are those built afresh (`reservable`)
nodefinder.CHECK_OPENERS = True
nodefinder.CHECK_RESERVABLE = True
# ... and, in the core's own tests, the golden traces and the property state machines, that
# every plan of every pass leaves the partition's whole object graph as it was (the planner
# only reads: core/purity.py). Not elsewhere: a fingerprint of the whole graph per plan costs
# minutes on the large states the REST and bench tests build (seen: CI past 20 min).
# tests/test_demo_log.py switches it on itself, for its replay of a demo log only.
PURITY_CHECKED = ("tests/core/", "tests/property/", "tests/test_traces.py")


# `make test` runs the tests on two workers (pytest-xdist, `--dist loadgroup`). The tests
# that start services (a nats-server, `ykbus up`, a core, a browser) run one after another
# within each of their two directories, in their order, as they would alone (each directory
# a group, kept on one worker: tests/integration; tests/faults, with no `ykbus up` and no
# browser), the rest (the core's, the property machines', the commands' on files) spread
# beside them. Each worker has a HOME of its own: `ykbus up` and the commands that find it
# keep their files there (~/.ykbus).
SERVICES = ("tests/integration/", "tests/faults/")
WORKER_HOME = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        config.stash[WORKER_HOME] = os.environ["HOME"] = tempfile.mkdtemp(prefix=f"ykbus-tests-{worker}-home-")


def pytest_unconfigure(config: pytest.Config) -> None:
    home = config.stash.get(WORKER_HOME, None)
    if home:
        shutil.rmtree(home, ignore_errors=True)


def _path(item: pytest.Item) -> str:
    """The test's file, from the project's root."""
    return item.path.relative_to(item.config.rootpath).as_posix()


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = _path(item)
        group = next((d for d in SERVICES if path.startswith(d)), None)
        if group:
            item.add_marker(pytest.mark.xdist_group(group.split("/")[1]))


def pytest_runtest_setup(item: pytest.Item) -> None:
    # a hook, not an autouse fixture: Hypothesis refuses function-scoped fixtures around @given
    partition.CHECK_PURE = _path(item).startswith(PURITY_CHECKED)


class Harness:
    """A core plus a log builder; `do(entry)` applies and returns the entry's outputs."""

    def __init__(self) -> None:
        self.core = Core(load_yaml=load_yaml)
        self.log = LogBuilder("rm-1")
        self.outputs = []

    def do(self, entry):
        outs = self.core.apply(entry)
        self.outputs.extend(outs)
        return outs

    def setup(self, config: str = "", **nodes):
        self.do(self.log.register(config))
        if nodes:
            from ykbus.log.build import node
            self.do(self.log.nodes(*[node(n, **cap) for n, cap in nodes.items()]))


def msgs(outs, kind):
    return [o.msg for o in outs if o.kind == kind]


def new_allocs(outs):
    return [a for msg in msgs(outs, "alloc") for a in msg.new]


def released(outs):
    return [r for msg in msgs(outs, "alloc") for r in msg.released]


def rejected_asks(outs):
    return [r for msg in msgs(outs, "alloc") for r in msg.rejected]


def app_updates(outs):
    return [(u.applicationID, u.state) for msg in msgs(outs, "app") for u in msg.updated]


def states(outs):
    return [s for msg in msgs(outs, "state") for s in msg.states]


def events(outs):
    return [e for msg in msgs(outs, "event") for e in msg.events]


@pytest.fixture
def anyio_backend():
    """anyio tests (integration, bus fuzz) run on asyncio."""
    return "asyncio"


@pytest.fixture
def h():
    return Harness()
