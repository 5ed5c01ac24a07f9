"""The fault suite kills real processes: a real nats-server (or three) on loopback ports."""

from tests.integration.conftest import nats_server  # noqa: F401 - the fixture, for these tests
