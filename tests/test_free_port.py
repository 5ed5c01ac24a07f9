"""`free_port` (bus/server.py), which every test, bench and `ykbus up`'s embedded
nats-server take their loopback ports from. A port from inside the range the kernel hands
out to outgoing connections could be taken by one of them (a route between two of a test's
nats-servers, a client's connection) between the call and the server's bind: CI once failed
so ("nats-3 ... bind: address already in use", tests/integration/test_compose.py)."""

from __future__ import annotations

import socket

from ykbus.bus.server import free_port


def _ephemeral() -> tuple[int, int]:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = (int(v) for v in f.read().split())
    return lo, hi


def test_ports_are_outside_the_range_outgoing_connections_take_theirs_from_and_never_given_twice():
    lo, hi = _ephemeral()
    ports = [free_port() for _ in range(200)]
    assert not [p for p in ports if lo <= p <= hi]
    assert len(set(ports)) == len(ports)
    for p in ports[:20]:  # each can be bound (it was free when given)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", p))


def test_a_port_taken_by_a_listener_is_not_given():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        assert taken not in {free_port() for _ in range(100)}


def test_a_port_whose_connections_wait_out_their_close_is_free_for_ykbus_up_to_take_again():
    """`ykbus up` restarted within a minute of a browser's use of its web UI: 9080's
    connections were in TIME_WAIT, the probe (without SO_REUSEADDR, which aiohttp's bind has)
    called the port busy, and the web UI moved to another one."""
    from ykbus.up import _port_free

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert not _port_free("127.0.0.1", port)  # listened on: busy
        with socket.create_connection(("127.0.0.1", port)) as client:
            conn, _ = listener.accept()
            conn.close()  # the server's side closes first: it waits out the close (TIME_WAIT)
            assert client.recv(1) == b""
    assert _port_free("127.0.0.1", port)
