"""The event log as JSON Lines (docs/protocol.md, "Event log file").

Input line: `{"seq", "ts", "rm", "kind", "msg"}`. `msg` is normally the JSON object the RM
sent. A body that was not a JSON object is kept exactly as received: as a JSON string
(`"msg": "not json{"`) when it is UTF-8 text, or base64 in `msg_b64` otherwise; a
MessagePack body is kept in `msg_b64` with `"encoding": "msgpack"`. So a recorded log
replays to the same decisions, byte for byte, as the live run made.

Output line: `{"seq", "rm", "kind", "msg"}` with `seq` the input sequence that caused it.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator
from typing import IO, Annotated, Any

import msgspec

from ykbus import limits
from ykbus.core.entries import Entry, Output
from ykbus.si.codec import DecodeError, check_bounds

Seq = Annotated[int, msgspec.Meta(ge=1, le=limits.INT64_MAX)]
Ts = Annotated[int, msgspec.Meta(ge=0, le=limits.INT64_MAX)]


class LogError(Exception):
    """A log file line that is not a valid entry; the text names the line."""


class _Line(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    seq: Seq
    ts: Ts
    kind: str  # kind and rm come from subject tokens: bounded by the line, like the body
    rm: str = ""
    msg: msgspec.Raw = msgspec.Raw(b"{}")
    msg_b64: str = ""
    encoding: str = "json"


class _InLine(msgspec.Struct, frozen=True, omit_defaults=True):
    seq: int
    ts: int
    rm: str
    kind: str
    msg: Any = None
    msg_b64: str = ""
    encoding: str = "json"


_line_decoder = msgspec.json.Decoder(_Line)
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_str_decoder = msgspec.json.Decoder(str)
_encoder = msgspec.json.Encoder()


def _body(line: _Line) -> bytes:
    """The entry's body as it was received. Raises ValueError when `msg_b64` is not base64."""
    if line.msg_b64:
        try:
            return base64.b64decode(line.msg_b64, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"msg_b64 is not valid base64: {exc}") from None
    raw = bytes(line.msg)
    if raw[:1] == b'"':
        return _str_decoder.decode(raw).encode("utf-8", "surrogatepass")
    return raw


def read_entries(lines: Iterable[bytes | str], source: str = "log",
                 gaps: list[str] | None = None) -> Iterator[Entry]:
    """Entries of a JSONL log, checking that seq increases strictly and ts never decreases;
    where seq skips a number, or the first is not 1, a line naming it is added to `gaps` (a
    recorded stream's seqs follow one another from 1: the live core stops at such a gap)."""
    last_seq, last_ts = 0, 0
    for number, text in enumerate(lines, 1):
        data = text.encode() if isinstance(text, str) else text
        if not data.strip():
            continue
        if len(data) > 2 * limits.MAX_MESSAGE_BYTES + 4096:  # a body, base64 or escaped, and the fields
            raise LogError(f"{source}:{number}: a line of {len(data)} bytes is over the limit")
        try:
            line = _line_decoder.decode(data)
            body = _body(line)
        except (msgspec.DecodeError, UnicodeError, RecursionError, ValueError) as exc:
            reason = "nested too deep" if isinstance(exc, RecursionError) else str(exc)
            if reason == "Input data was truncated" and _SURROGATE.search(data):  # msgspec's words for it
                reason = "a lone surrogate escape (\\ud800 to \\udfff) is not text: write such a body as msg_b64"
            raise LogError(f"{source}:{number}: not a log entry: {reason}") from None
        if line.seq <= last_seq:
            raise LogError(f"{source}:{number}: seq {line.seq} does not increase (previous {last_seq})")
        if line.ts < last_ts:
            raise LogError(f"{source}:{number}: ts {line.ts} goes back in time (previous {last_ts})")
        if gaps is not None and line.seq != last_seq + 1:
            missing = line.seq - last_seq - 1
            entries = f"{missing} {'entry' if missing == 1 else 'entries'} missing"
            gaps.append(f"{source}:{number}: seq {line.seq} follows {last_seq}: {entries}" if last_seq else
                        f"{source}:{number}: the log starts at seq {line.seq}: {entries} before it (a stream "
                        "trimmed below a snapshot?)")
        last_seq, last_ts = line.seq, line.ts
        yield Entry(seq=line.seq, ts=line.ts, rm=line.rm, kind=line.kind, msg=body, encoding=line.encoding)


def encode_entry(entry: Entry) -> bytes:
    """One input log line for `entry`, keeping its body exactly (see module doc)."""
    msg: Any = None
    b64 = ""
    if entry.encoding == "json":
        # Embedded as JSON only when it is an object within the input bounds, with no white
        # space around it and no line break in it (so that the line reads back to the same
        # bytes); anything else is kept as a string or base64.
        body = entry.msg
        ok = body[:1] == b"{" and body[-1:] == b"}" and b"\n" not in body and b"\r" not in body
        if ok:
            try:
                check_bounds(entry.msg, "json")
                msgspec.json.decode(entry.msg)
            except (DecodeError, msgspec.DecodeError, UnicodeError, RecursionError):
                ok = False
        if ok:
            msg = msgspec.Raw(entry.msg)
        else:
            try:
                msg = entry.msg.decode()
            except UnicodeDecodeError:
                b64 = base64.b64encode(entry.msg).decode()
    elif entry.msg:
        b64 = base64.b64encode(entry.msg).decode()
    else:
        msg = ""  # an empty MessagePack body: "" (no msg_b64 would read back as {})
    return _encoder.encode(_InLine(entry.seq, entry.ts, entry.rm, entry.kind, msg, b64, entry.encoding))


def encode_output(out: Output) -> bytes:
    return _encoder.encode(out)  # {seq, rm, kind, msg}: the Struct's own fields, in order


def write_outputs(outputs: Iterable[Output], stream: IO[bytes]) -> int:
    n = 0
    for out in outputs:
        stream.write(encode_output(out))
        stream.write(b"\n")
        n += 1
    return n
