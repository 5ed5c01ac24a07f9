"""A read waiting for the core's event loop is seen without the loop (bus/readapi.py
`ReadTurns`): the writer, which applies the entries already delivered without a pause, asks
after each entry and lets the loop run only then. Real sockets on loopback."""

from __future__ import annotations

import socket
import time

import anyio
import pytest

from ykbus.bus.readapi import POLL_EVERY_S, HttpReadApi, ReadTurns

pytestmark = pytest.mark.anyio


def after_a_poll_interval(turns: ReadTurns) -> bool:
    """`turns.waiting()` once its sockets are polled again, the loop not run meanwhile (as the
    writer asks after an entry)."""
    time.sleep(POLL_EVERY_S)
    return turns.waiting()


async def turns_until(check, turns: int = 200) -> None:
    for _ in range(turns):
        if check():
            return
        await anyio.sleep(0.005)
    raise AssertionError("not within a second")


def read_into(sock: socket.socket, answer: bytearray) -> bytearray:
    """What `sock` has received so far, added to `answer` (without waiting)."""
    try:
        answer.extend(sock.recv(65536))
    except BlockingIOError:
        pass
    return answer


async def test_a_request_on_a_socket_is_seen_waiting_until_the_loop_answers_it():
    api = HttpReadApi(lambda verb, request: {"verb": verb}, lambda: None, "127.0.0.1", 0, None)
    turns = ReadTurns(api)
    async with anyio.create_task_group() as tg:
        await tg.start(api.serve)
        assert not after_a_poll_interval(turns)  # nothing asked: the writer never yields
        # a client connects: the kernel completes it, the loop has not run to accept it
        with socket.create_connection(("127.0.0.1", api.port)) as sock:
            assert after_a_poll_interval(turns)
            await turns_until(lambda: not after_a_poll_interval(turns))  # accepted, and idle: nothing waits
            sock.sendall(b"GET /api/verb HTTP/1.1\r\nHost: ykbus\r\n\r\n")
            assert after_a_poll_interval(turns)  # bytes the loop has not read yet
            await turns.give()  # the turns the writer gives after its entry
            sock.setblocking(False)
            answer = bytearray()
            await turns_until(lambda: b"verb" in read_into(sock, answer))
            assert answer.startswith(b"HTTP/1.1 200")
            assert not after_a_poll_interval(turns)  # answered: the writer goes on without a pause
        tg.cancel_scope.cancel()


async def test_a_read_being_answered_keeps_the_writer_giving_turns():
    api = HttpReadApi(lambda verb, request: {}, lambda: None, "127.0.0.1", 0, None)
    turns = ReadTurns(api)
    answered = anyio.Event()

    def slow_read(verb, request):  # a read the NATS API answers (its `answering` counts it)
        assert turns.waiting()  # while it is answered, the writer gives a turn after each entry
        answered.set()
        return {"verb": verb}

    assert await turns.answer_nats(None, slow_read, "health", b"{}") == {"verb": "health"}
    assert answered.is_set() and not turns.waiting()
    assert await turns.answer_nats(None, slow_read, "health", b"[1]") == {
        "error": "the request body must be a JSON object"}
    assert not turns.waiting()
