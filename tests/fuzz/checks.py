"""Apply a log to an in-process core and check, after every entry, what a user would notice.

`Run(entries).check()` raises `Failure` (an AssertionError) at the first broken rule:

- `crash`: `Core.apply` raised; `slow`: it took more CPU time than the budget (unbounded work in
  one entry);
- `unanswered`: an entry from an RM (anything but a tick) that does not decode, or has
  items that do not, got no output addressed to that RM, or fewer rejections than bad items;
- `invariant`: a safety invariant of tests/invariants.py broke;
- `wire`: an output cannot be published as the service publishes it (it does not encode,
  cannot be split under NATS's max payload, does not decode back as its message type, or
  its subject is not a valid NATS subject);
- `replay`, `snapshot`: the same log applied again, or resumed from a snapshot, decides
  differently (or raises);
- `log`: the log written with `encode_entry` does not read back as the same entries.

A failure carries a `signature` (category, exception type, place) so the long campaign
can count distinct classes, and it writes the log that broke to `.fuzz-failures/` as a
JSONL file that `ykbus replay` reads.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import signal
import tempfile
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path

from tests import invariants
from ykbus import limits
from ykbus.bus.publisher import split_output
from ykbus.core import Core
from ykbus.core.entries import ENTRY_KINDS, Entry, Output
from ykbus.core.registry import RM_ID
from ykbus.log.jsonl import LogError, encode_entry, encode_output, read_entries
from ykbus.si import codec
from ykbus.si import messages as m
from ykbus.yamlload import load_yaml

MAX_PAYLOAD = 1 << 20  # nats-server's default max_payload: what the service splits outputs for
LARGER_PAYLOADS = (8 << 20, 64 << 20)  # what an operator may configure instead (64 MiB: NATS's own cap)
MAX_SUBJECT = 4000  # a PUB control line must fit nats-server's max_control_line (4 KiB)
APPLY_BUDGET_S = float(os.environ.get("YKBUS_FUZZ_APPLY_S", "2.0"))
FAILURES = Path(__file__).parent.parent.parent / ".fuzz-failures"


class TooSlow(Exception):
    pass


class Failure(AssertionError):
    def __init__(self, category: str, detail: str, signature: str, log_path: str = "") -> None:
        self.category, self.detail, self.signature = category, detail, signature
        where = f"\n  log: {log_path}" if log_path else ""
        super().__init__(f"[{category}] {signature}\n  {detail}{where}")


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise TooSlow in the main thread after `seconds` of this process's CPU time (SIGPROF):
    unbounded work is caught, a machine busy with other processes is not taken for it."""
    def on_alarm(signum, frame):  # noqa: ARG001
        raise TooSlow(f"over {seconds} s of CPU")

    old = signal.signal(signal.SIGPROF, on_alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)


def exception_signature(exc: BaseException) -> str:
    """`Type at file:function`, the innermost frame in ykbus (else the innermost one)."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/ykbus/" in f.filename and "/tests/" not in f.filename]
    f = (ours or frames or [None])[-1]
    place = f"{Path(f.filename).name}:{f.name}" if f is not None else "?"
    return f"{type(exc).__name__} at {place}"


def _normalise(text: str) -> str:
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text.splitlines()[0] if text else "")
    return re.sub(r"\d+", "N", text)[:120]


def describe(entry: Entry, limit: int = 300) -> str:
    body = entry.msg if len(entry.msg) <= limit else entry.msg[:limit] + b"...(%d bytes)" % len(entry.msg)
    return f"seq {entry.seq} rm {entry.rm[:40]!r} kind {entry.kind[:40]!r} encoding {entry.encoding!r} body {body!r}"


def bad_items(entry: Entry) -> int | None:
    """None when `entry` is well formed; else how many items must be rejected (0: the
    whole message is unusable and one answer is due)."""
    if entry.kind not in ENTRY_KINDS or len(entry.msg) > limits.MAX_MESSAGE_BYTES:
        return 0
    try:
        decoded = codec.decode_input(entry.kind, entry.msg, entry.encoding)
    except Exception:  # noqa: BLE001 - DecodeError, or the decoder itself broke: both malformed
        return 0
    bad = sum(isinstance(item, codec.BadItem) for name in ("asks", "releases", "askReleases", "new", "remove", "nodes")
              for item in getattr(decoded, name, ()))
    return bad or None


def _answers(outputs: Sequence[Output], rm: str) -> int:
    """How many items the outputs address to `rm` (rejections, events, a register answer)."""
    n = 0
    for o in outputs:
        if o.rm != rm:
            continue
        if o.kind == "register":
            n += 1
        elif o.kind == "event":
            n += len(o.msg.events)
        elif o.kind in ("app", "node", "alloc"):
            n += len(o.msg.rejected)
    return n


def answered(entry: Entry, outputs: Sequence[Output]) -> None:
    if entry.kind == "tick":
        return
    bad = bad_items(entry)
    if bad is None:
        return
    got = _answers(outputs, entry.rm)
    if got == 0 or got < bad:
        raise Failure("unanswered", f"{describe(entry)}\n  outputs: {[(o.rm[:40], o.kind) for o in outputs]}",
                      f"{entry.kind if entry.kind in ENTRY_KINDS else 'unknown kind'} entry"
                      f"{' from _core' if not entry.rm else ''}: {got} answers to {bad or 'a whole'} bad "
                      f"{'items' if bad else 'message'}")


def server_max_payload(entry: Entry) -> int:
    """The max payload of the smallest usual server that could have carried `entry` (1 MiB,
    the default, for anything that fits in it): its outputs must fit the same server. A log
    file can hold a body larger than any server takes; that is judged as if on the largest."""
    for size in (MAX_PAYLOAD, *LARGER_PAYLOADS):
        if len(entry.msg) + 4096 <= size:
            return size
    return LARGER_PAYLOADS[-1]


def outputs_fit_the_wire(core: Core, outputs: Sequence[Output], max_payload: int = MAX_PAYLOAD,
                         entry_rm: str | None = None) -> None:
    """Each output is published as the service would: encoded in the RM's encoding and split
    under the max payload, on `yk.v1.out.<rm>.<kind>`; each part decodes as its type. The
    subject is checked for outputs to an rm other than the entry's own (`entry_rm`): the
    entry's own rm came from a subject token, except in a hand-made log file."""
    for o in outputs:
        rm = core.rms.get(o.rm)
        encoding = rm.encoding if rm is not None else "json"
        token = o.rm or "_core"
        if o.rm != entry_rm and (not RM_ID.match(token) or len(f"yk.v1.out.{token}.{o.kind}") > MAX_SUBJECT):
            raise Failure("wire", f"output {o.kind} to rm {o.rm[:80]!r}",
                          "output addressed to an rm that is not a NATS subject token (or too long for a subject)")
        try:
            encode_output(o)
            parts = split_output(o.msg, encoding, max_payload)
        except ValueError as exc:
            raise Failure("wire", f"{o.kind} output to {o.rm[:40]!r}: {str(exc)[:200]}",
                          f"{o.kind} output cannot be split under the max payload") from None
        except Exception as exc:  # noqa: BLE001 - any failure to encode is the finding
            raise Failure("wire", f"{o.kind} output: {exc!r}"[:300],
                          f"{o.kind} output does not encode ({encoding}): {exception_signature(exc)}") from None
        t = m.RegisterResourceManagerResponse if o.kind == "register" else m.OUTPUT_TYPES[o.kind]
        for part in parts:
            try:
                codec.decode(t, part, encoding)
            except codec.DecodeError as exc:
                raise Failure("wire", f"{o.kind} output part: {str(exc)[:200]}",
                              f"{o.kind} output does not decode as {t.__name__} ({encoding}): {_normalise(str(exc))}"
                              ) from None


def safe_line(e: Entry) -> bytes:
    """`encode_entry(e)`, or when that raises, the same entry with its body in base64 (which
    the reader accepts for any encoding): failing logs are always saved."""
    try:
        return encode_entry(e)
    except Exception:  # noqa: BLE001
        return json.dumps({"seq": e.seq, "ts": e.ts, "rm": e.rm, "kind": e.kind, "encoding": e.encoding,
                           "msg_b64": base64.b64encode(e.msg).decode()}).encode()


def write_log(entries: Sequence[Entry], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for e in entries:
            f.write(safe_line(e) + b"\n")


def log_round_trip(entries: Sequence[Entry], path: Path) -> None:
    """The log written line by line with `encode_entry` and read back, as `ykbus record`
    writes it and `ykbus replay` reads it."""
    lines = []
    for e in entries:
        try:
            lines.append(encode_entry(e))
        except Exception as exc:  # noqa: BLE001
            raise Failure("log", f"{describe(e)}: {exc!r}"[:500],
                          f"encode_entry raised: {exception_signature(exc)}") from None
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    try:
        with open(path, "rb") as f:
            back = list(read_entries(f, str(path)))
    except LogError as exc:
        raise Failure("log", str(exc)[:300], "a log written by encode_entry does not read back: "
                      + _normalise(str(exc).split(": ", 1)[-1])) from None
    except Exception as exc:  # noqa: BLE001
        raise Failure("log", repr(exc)[:300], f"read_entries raised on a log encode_entry wrote: "
                      f"{exception_signature(exc)}") from None
    for a, b in zip(entries, back, strict=False):
        if a != b:
            raise Failure("log", f"wrote {describe(a)}\n  read {describe(b)}",
                          "a log written by encode_entry reads back as another entry")
    if len(back) != len(entries):
        raise Failure("log", f"{len(entries)} entries written, {len(back)} read", "log line count changed")


class Run:
    """One log through one core, checked entry by entry."""

    def __init__(self, budget_s: float = APPLY_BUDGET_S) -> None:
        self.core = Core(load_yaml=load_yaml)
        self.budget_s = budget_s
        self.entries: list[Entry] = []
        self.per_entry: list[list[bytes]] = []
        self.applied = 0

    def fail(self, category: str, detail: str, signature: str) -> Failure:
        digest = hashlib.sha1(signature.encode()).hexdigest()[:10]
        path = FAILURES / f"{category}-{digest}.in.jsonl"
        try:
            write_log(self.entries, path)
        except Exception:  # noqa: BLE001 - a log that cannot be written is reported in the message
            path = Path("(log not writable)")
        return Failure(category, detail, signature, str(path))

    def apply(self, entry: Entry) -> list[Output]:
        self.entries.append(entry)
        try:
            with time_limit(self.budget_s):
                outputs = self.core.apply(entry)
        except TooSlow:
            raise self.fail("slow", describe(entry), f"{entry.kind} entry: apply took over {self.budget_s} s of CPU") from None
        except Exception as exc:  # noqa: BLE001 - apply must never raise: any exception is the finding
            raise self.fail("crash", f"{describe(entry)}\n  {exc!r}"[:800],
                            f"{entry.kind} entry: {exception_signature(exc)}") from exc
        self.applied += 1
        try:
            self.per_entry.append([encode_output(o) for o in outputs])
            answered(entry, outputs)
            outputs_fit_the_wire(self.core, outputs, server_max_payload(entry), entry.rm)
        except Failure as f:
            raise self.fail(f.category, f"{describe(entry)}\n  {f.detail}", f.signature) from None
        try:
            invariants.after_entry(self.core, outputs)
        except AssertionError as exc:
            raise self.fail("invariant", f"{describe(entry)}\n  {exc}", f"after a {entry.kind} entry: "
                            f"{_normalise(str(exc))}") from None
        return outputs

    def apply_all(self, entries: Sequence[Entry]) -> None:
        for e in entries:
            self.apply(e)

    def finish(self, cuts: Sequence[int] = ()) -> None:
        """Replay, snapshot + tail, and log round trip of everything applied."""
        try:
            with time_limit(self.budget_s * 4):
                invariants.replay_is_identical(self.entries, self.per_entry)
        except AssertionError as exc:
            raise self.fail("replay", str(exc), "replaying the same log decides differently") from None
        except Exception as exc:  # noqa: BLE001
            raise self.fail("replay", repr(exc)[:300], f"replay: {exception_signature(exc)}") from exc
        try:
            with time_limit(self.budget_s * 4):
                invariants.snapshot_plus_tail_is_full_replay(self.entries, self.per_entry, cuts, self.core.dump())
        except AssertionError as exc:
            raise self.fail("snapshot", str(exc)[:500], "snapshot + tail: " + _normalise(str(exc))) from None
        except Exception as exc:  # noqa: BLE001
            raise self.fail("snapshot", repr(exc)[:300], f"snapshot: {exception_signature(exc)}") from exc
        with tempfile.TemporaryDirectory(prefix="ykbus-fuzz-") as tmp:
            try:
                log_round_trip(self.entries, Path(tmp) / "log.in.jsonl")
            except Failure as f:
                raise self.fail(f.category, f.detail, f.signature) from None


def check_log(entries: Sequence[Entry], cuts: Sequence[int] = ()) -> Run:
    run = Run()
    run.apply_all(entries)
    run.finish(cuts)
    return run
