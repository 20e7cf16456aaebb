"""The capability wire, version 1, for programs running inside an Airlock sandbox.

The contract is docs/wire.md in the Airlock repository; this module is the
program-side codec of it, written against the Python standard library only
(the sandbox's interpreter has no msgpack module). It knows the msgpack subset
the wire uses and nothing more.

Values map to Python as: nil <-> None, boolean <-> bool, integer <-> int
(-2**63 .. 2**64-1), float <-> float (always written as float64), string <-> str,
bytes (msgpack bin) <-> bytes, array <-> list (tuple accepted on output),
map <-> dict with str keys.

Decoding is total: decode_payload() and FrameDecoder never raise on any
input; they return a frame, Invalid, Dropped or Fault, exactly as docs/wire.md
section 2 describes. Encoding raises WireEncodeError for a value the peer
would refuse (unsupported type, integer out of range, lone surrogate in a str,
nesting or size beyond the limits, payload over 16 MiB).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, List, Optional, Union

VERSION = 1
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_VALUES = 262144
LENGTH_PREFIX_BYTES = 4

KINDS = ("cap_call", "cap_result", "cancel", "outcome", "hook_call", "hook_result")

FAULT_OVERSIZED_LENGTH = "oversized_length"
FAULT_MALFORMED = "malformed"
FAULT_LIMIT = "limit"
FAULT_BAD_ENVELOPE = "bad_envelope"
FAULT_UNSUPPORTED_VERSION = "unsupported_version"


class WireEncodeError(ValueError):
    """A value or frame that the wire cannot carry (the peer would refuse it)."""


# --------------------------------------------------------------------- frames


@dataclass(frozen=True)
class Ok:
    """A call's result value."""

    value: Any


@dataclass(frozen=True)
class Refusal:
    """A named refusal: a stable snake_case code and a sentence."""

    code: str
    message: str


Answer = Union[Ok, Refusal]


@dataclass(frozen=True)
class CapCall:
    id: int
    token: bytes
    cap: str
    args: Any
    deadline_ms: int
    kind = "cap_call"


@dataclass(frozen=True)
class CapResult:
    id: int
    answer: Answer
    kind = "cap_result"


@dataclass(frozen=True)
class Cancel:
    id: int
    kind = "cancel"


@dataclass(frozen=True)
class Completed:
    value: Any


@dataclass(frozen=True)
class Errored:
    message: str
    details: Any = None


@dataclass(frozen=True)
class Outcome:
    id: int
    result: Union[Completed, Errored]
    kind = "outcome"


@dataclass(frozen=True)
class HookCall:
    id: int
    token: bytes
    hook: str
    name: str
    args: Any
    deadline_ms: int
    kind = "hook_call"


@dataclass(frozen=True)
class HookResult:
    id: int
    answer: Answer
    kind = "hook_result"


Frame = Union[CapCall, CapResult, Cancel, Outcome, HookCall, HookResult]


@dataclass(frozen=True)
class Invalid:
    """A known kind whose body has the wrong shape; the channel stays open."""

    id: int
    kind: str
    reason: str


@dataclass(frozen=True)
class Dropped:
    """A well-formed frame of a kind this version does not know."""

    id: int
    kind: str


@dataclass(frozen=True)
class Fault:
    """The stream cannot be trusted: settle every call in flight and close."""

    kind: str
    detail: str


Event = Union[CapCall, CapResult, Cancel, Outcome, HookCall, HookResult, Invalid, Dropped, Fault]


# --------------------------------------------------------------------- decoding


class _Stop(Exception):
    """Internal: the first defect found; never escapes this module."""

    def __init__(self, fault: str, detail: str) -> None:
        super().__init__(detail)
        self.fault = fault
        self.detail = detail


_STRUCT = {
    0xCA: (">f", 4),
    0xCB: (">d", 8),
    0xCC: (">B", 1),
    0xCD: (">H", 2),
    0xCE: (">I", 4),
    0xCF: (">Q", 8),
    0xD0: (">b", 1),
    0xD1: (">h", 2),
    0xD2: (">i", 4),
    0xD3: (">q", 8),
}
# Header sizes of the length-prefixed families: type byte -> (format, size).
_STR_HEADERS = {0xD9: (">B", 1), 0xDA: (">H", 2), 0xDB: (">I", 4)}
_BIN_HEADERS = {0xC4: (">B", 1), 0xC5: (">H", 2), 0xC6: (">I", 4)}
_ARRAY_HEADERS = {0xDC: (">H", 2), 0xDD: (">I", 4)}
_MAP_HEADERS = {0xDE: (">H", 2), 0xDF: (">I", 4)}


class _Reader:
    """Reads one value front to back in the order of docs/wire.md section 4."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.end = len(data)
        self.declared = 1  # the outermost value

    def fail(self, what: str) -> _Stop:
        return _Stop(FAULT_MALFORMED, f"{what} at byte {self.pos}")

    def limit(self, what: str) -> _Stop:
        return _Stop(FAULT_LIMIT, f"{what} at byte {self.pos}")

    def _fixed(self, fmt: str, size: int, what: str) -> Any:
        if self.end - self.pos < size:
            raise self.fail(f"truncated {what}")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def _body(self, length: int, what: str) -> bytes:
        if length > self.end - self.pos:
            raise self.fail(f"{what} runs past the end")
        body = self.data[self.pos : self.pos + length]
        self.pos += length
        return body

    def _text(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("string is not UTF-8") from None

    def _string_at(self, b: int) -> Optional[str]:
        """Reads a str whose type byte `b` was consumed; None if `b` is no str."""
        if 0xA0 <= b <= 0xBF:
            return self._text(self._body(b & 0x1F, "string"))
        if b in _STR_HEADERS:
            fmt, size = _STR_HEADERS[b]
            n = self._fixed(fmt, size, "string header")
            return self._text(self._body(n, "string"))
        return None

    def _admit(self, depth: int, elements: int) -> None:
        if depth > MAX_DEPTH:
            raise self.limit("nesting deeper than the limit")
        if elements > self.end - self.pos:
            raise self.fail("container declares more elements than bytes left")
        if self.declared + elements > MAX_VALUES:
            raise self.limit("more values than the limit")
        self.declared += elements

    def read(self, depth: int) -> Any:
        if self.pos >= self.end:
            raise self.fail("value missing")
        b = self.data[self.pos]
        self.pos += 1
        if b <= 0x7F:
            return b
        if b >= 0xE0:
            return b - 0x100
        if b == 0xC0:
            return None
        if b == 0xC2:
            return False
        if b == 0xC3:
            return True
        if b in _STRUCT:
            fmt, size = _STRUCT[b]
            value = self._fixed(fmt, size, "number")
            return float(value) if b in (0xCA, 0xCB) else value
        s = self._string_at(b)
        if s is not None:
            return s
        if b in _BIN_HEADERS:
            fmt, size = _BIN_HEADERS[b]
            n = self._fixed(fmt, size, "bytes header")
            return bytes(self._body(n, "bytes"))
        if 0x90 <= b <= 0x9F or b in _ARRAY_HEADERS:
            if b <= 0x9F:
                n = b & 0x0F
            else:
                fmt, size = _ARRAY_HEADERS[b]
                n = self._fixed(fmt, size, "array header")
            self._admit(depth, n)
            return [self.read(depth + 1) for _ in range(n)]
        if 0x80 <= b <= 0x8F or b in _MAP_HEADERS:
            if b <= 0x8F:
                n = b & 0x0F
            else:
                fmt, size = _MAP_HEADERS[b]
                n = self._fixed(fmt, size, "map header")
            self._admit(depth, 2 * n)
            out = {}
            for _ in range(n):
                if self.pos >= self.end:
                    raise self.fail("map key missing")
                key_at = self.pos
                kb = self.data[self.pos]
                self.pos += 1
                key = self._string_at(kb)
                if key is None:
                    self.pos = key_at
                    raise self.fail("map key is not a string")
                if key in out:
                    self.pos = key_at
                    raise self.fail("repeated map key")
                out[key] = self.read(depth + 1)
            return out
        # 0xc1 and every extension family.
        self.pos -= 1
        raise self.fail("type byte outside the wire's msgpack subset")


def decode_value(data: bytes) -> Any:
    """Decodes exactly one value occupying all of `data`.

    Raises ValueError whose args[0] is "malformed" or "limit" (for tools and
    tests; the channel uses decode_payload, which never raises).
    """
    try:
        return _decode_whole(bytes(data))
    except _Stop as stop:
        raise ValueError(stop.fault, stop.detail) from None


def _decode_whole(data: bytes) -> Any:
    reader = _Reader(data)
    value = reader.read(1)
    if reader.pos != reader.end:
        raise reader.fail("trailing bytes after the value")
    return value


class _BodyError(Exception):
    pass


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _field(body: dict, key: str, check, what: str, prefix: str = "body") -> Any:
    if key not in body:
        raise _BodyError(f"{prefix}.{key} is missing")
    value = body[key]
    if check is not None and not check(value):
        raise _BodyError(f"{prefix}.{key} must be {what}")
    return value


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_bytes(v: Any) -> bool:
    return isinstance(v, bytes)


def _is_uint(v: Any) -> bool:
    return _is_int(v) and v >= 0


def _answer(body: dict) -> Answer:
    if ("ok" in body) == ("error" in body):
        raise _BodyError("body must hold exactly one of ok, error")
    if "ok" in body:
        return Ok(body["ok"])
    error = body["error"]
    if not isinstance(error, dict):
        raise _BodyError("body.error must be a map")
    code = _field(error, "code", _is_str, "a string", "body.error")
    message = _field(error, "message", _is_str, "a string", "body.error")
    return Refusal(code, message)


def _frame(kind: str, frame_id: int, body: dict) -> Frame:
    if kind == "cap_call":
        token = _field(body, "token", _is_bytes, "bytes (msgpack bin)")
        cap = _field(body, "cap", _is_str, "a string")
        args = _field(body, "args", None, "")
        deadline = _field(body, "deadline_ms", _is_uint, "a non-negative integer")
        return CapCall(frame_id, token, cap, args, deadline)
    if kind == "cap_result":
        return CapResult(frame_id, _answer(body))
    if kind == "cancel":
        return Cancel(frame_id)
    if kind == "outcome":
        if ("completed" in body) == ("errored" in body):
            raise _BodyError("body must hold exactly one of completed, errored")
        if "completed" in body:
            return Outcome(frame_id, Completed(body["completed"]))
        errored = body["errored"]
        if not isinstance(errored, dict):
            raise _BodyError("body.errored must be a map")
        message = _field(errored, "message", _is_str, "a string", "body.errored")
        return Outcome(frame_id, Errored(message, errored.get("details")))
    if kind == "hook_call":
        token = _field(body, "token", _is_bytes, "bytes (msgpack bin)")
        hook = _field(body, "hook", _is_str, "a string")
        name = _field(body, "name", _is_str, "a string")
        args = _field(body, "args", None, "")
        deadline = _field(body, "deadline_ms", _is_uint, "a non-negative integer")
        return HookCall(frame_id, token, hook, name, args, deadline)
    return HookResult(frame_id, _answer(body))


def decode_payload(payload: bytes) -> Event:
    """The verdict on one payload (the bytes after the length prefix). Never raises."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        return Fault(FAULT_OVERSIZED_LENGTH, f"payload of {len(payload)} bytes exceeds the cap")
    try:
        envelope = _decode_whole(bytes(payload))
    except _Stop as stop:
        return Fault(stop.fault, stop.detail)
    except RecursionError:  # unreachable with MAX_DEPTH 64; kept total regardless
        return Fault(FAULT_LIMIT, "nesting too deep")
    if not isinstance(envelope, dict):
        return Fault(FAULT_BAD_ENVELOPE, "payload is not a map")
    if "v" not in envelope:
        return Fault(FAULT_BAD_ENVELOPE, "envelope has no v")
    v = envelope["v"]
    if not _is_int(v):
        return Fault(FAULT_BAD_ENVELOPE, "envelope v is not an integer")
    if v != VERSION:
        return Fault(FAULT_UNSUPPORTED_VERSION, "envelope v is not 1")
    frame_id = envelope.get("id")
    if not _is_uint(frame_id):
        return Fault(FAULT_BAD_ENVELOPE, "envelope id is missing or not a non-negative integer")
    kind = envelope.get("kind")
    if not isinstance(kind, str):
        return Fault(FAULT_BAD_ENVELOPE, "envelope kind is missing or not a string")
    if "body" not in envelope:
        return Fault(FAULT_BAD_ENVELOPE, "envelope has no body")
    if kind not in KINDS:
        return Dropped(frame_id, kind)
    body = envelope["body"]
    if not isinstance(body, dict):
        return Invalid(frame_id, kind, "body must be a map")
    try:
        return _frame(kind, frame_id, body)
    except _BodyError as e:
        return Invalid(frame_id, kind, str(e))


class FrameDecoder:
    """Incremental decoder for one direction of one channel.

    feed() whatever the socket returned, then call next() until it answers
    None (need more bytes). After a Fault, next() returns that Fault forever
    and input is discarded. The length prefix is judged as soon as its four
    bytes arrive, so an oversized frame is refused before its payload is
    buffered.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._consumed = 0
        self._fault: Optional[Fault] = None

    def feed(self, data: bytes) -> None:
        if self._fault is not None:
            return
        if self._consumed:
            del self._buffer[: self._consumed]
            self._consumed = 0
        self._buffer += data

    def next(self) -> Optional[Event]:
        if self._fault is not None:
            return self._fault
        available = len(self._buffer) - self._consumed
        if available < LENGTH_PREFIX_BYTES:
            return None
        (length,) = struct.unpack_from(">I", self._buffer, self._consumed)
        if length > MAX_PAYLOAD_BYTES:
            return self._stop(
                Fault(FAULT_OVERSIZED_LENGTH, f"length prefix {length} exceeds the cap")
            )
        if available - LENGTH_PREFIX_BYTES < length:
            return None
        start = self._consumed + LENGTH_PREFIX_BYTES
        payload = bytes(self._buffer[start : start + length])
        self._consumed = start + length
        event = decode_payload(payload)
        if isinstance(event, Fault):
            return self._stop(event)
        return event

    def _stop(self, fault: Fault) -> Fault:
        self._fault = fault
        self._buffer = bytearray()
        self._consumed = 0
        return fault

    @property
    def faulted(self) -> bool:
        return self._fault is not None

    @property
    def has_partial_frame(self) -> bool:
        """Bytes of an unfinished frame are buffered (a stream ending now ended mid-frame)."""
        return self._fault is None and len(self._buffer) > self._consumed


# --------------------------------------------------------------------- encoding


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()
        self.declared = 1

    def admit(self, depth: int, elements: int) -> None:
        if depth > MAX_DEPTH:
            raise WireEncodeError(f"value nests deeper than {MAX_DEPTH} containers")
        if elements > 0xFFFFFFFF or self.declared + elements > MAX_VALUES:
            raise WireEncodeError(f"value holds more than {MAX_VALUES} values")
        self.declared += elements

    def header(self, n: int, fix: int, fix_max: int, families: List[int]) -> None:
        """Shortest header: fix|n when n <= fix_max, else families for 8/16/32-bit sizes."""
        if fix_max and n <= fix_max:
            self.out.append(fix | n)
            return
        for family, fmt, top in zip(families, (">B", ">H", ">I"), (0xFF, 0xFFFF, 0xFFFFFFFF)):
            if family and n <= top:
                self.out.append(family)
                self.out += struct.pack(fmt, n)
                return
        raise WireEncodeError("longer than msgpack's 2**32-1 limit")

    def string(self, s: str) -> None:
        try:
            raw = s.encode("utf-8")
        except UnicodeEncodeError:
            raise WireEncodeError("string is not valid Unicode (lone surrogate)") from None
        self.header(len(raw), 0xA0, 31, [0xD9, 0xDA, 0xDB])
        self.out += raw

    def binary(self, b: bytes) -> None:
        self.header(len(b), 0, 0, [0xC4, 0xC5, 0xC6])
        self.out += b

    def uint(self, n: int) -> None:
        if n <= 0x7F:
            self.out.append(n)
        elif n <= 0xFF:
            self.out += b"\xcc" + struct.pack(">B", n)
        elif n <= 0xFFFF:
            self.out += b"\xcd" + struct.pack(">H", n)
        elif n <= 0xFFFFFFFF:
            self.out += b"\xce" + struct.pack(">I", n)
        else:
            self.out += b"\xcf" + struct.pack(">Q", n)

    def value(self, v: Any, depth: int) -> None:
        if v is None:
            self.out.append(0xC0)
        elif v is True:
            self.out.append(0xC3)
        elif v is False:
            self.out.append(0xC2)
        elif isinstance(v, int):
            if v >= 0:
                if v > 0xFFFFFFFFFFFFFFFF:
                    raise WireEncodeError(f"integer {v} is above 2**64-1")
                self.uint(v)
            elif v >= -32:
                self.out.append(v + 0x100)
            elif v >= -0x80:
                self.out += b"\xd0" + struct.pack(">b", v)
            elif v >= -0x8000:
                self.out += b"\xd1" + struct.pack(">h", v)
            elif v >= -0x80000000:
                self.out += b"\xd2" + struct.pack(">i", v)
            elif v >= -0x8000000000000000:
                self.out += b"\xd3" + struct.pack(">q", v)
            else:
                raise WireEncodeError(f"integer {v} is below -2**63")
        elif isinstance(v, float):
            self.out += b"\xcb" + struct.pack(">d", v)
        elif isinstance(v, str):
            self.string(v)
        elif isinstance(v, (bytes, bytearray, memoryview)):
            self.binary(bytes(v))
        elif isinstance(v, (list, tuple)):
            self.admit(depth, len(v))
            self.header(len(v), 0x90, 15, [0, 0xDC, 0xDD])
            for item in v:
                self.value(item, depth + 1)
        elif isinstance(v, dict):
            self.admit(depth, 2 * len(v))
            self.header(len(v), 0x80, 15, [0, 0xDE, 0xDF])
            for key, item in v.items():
                if not isinstance(key, str):
                    raise WireEncodeError(f"map key {key!r} is not a str")
                self.string(key)
                self.value(item, depth + 1)
        else:
            raise WireEncodeError(f"{type(v).__name__} is not a wire value")


def encode_value(v: Any) -> bytes:
    """The canonical encoding of one value (docs/wire.md section 3)."""
    w = _Writer()
    w.value(v, 1)
    return bytes(w.out)


def _body(frame: Frame) -> dict:
    def answer(a: Answer) -> dict:
        if isinstance(a, Ok):
            return {"ok": a.value}
        if isinstance(a, Refusal):
            return {"error": {"code": a.code, "message": a.message}}
        raise WireEncodeError("answer must be Ok or Refusal")

    if isinstance(frame, CapCall):
        return {
            "token": bytes(frame.token),
            "cap": frame.cap,
            "args": frame.args,
            "deadline_ms": frame.deadline_ms,
        }
    if isinstance(frame, (CapResult, HookResult)):
        return answer(frame.answer)
    if isinstance(frame, Cancel):
        return {}
    if isinstance(frame, Outcome):
        if isinstance(frame.result, Completed):
            return {"completed": frame.result.value}
        if isinstance(frame.result, Errored):
            return {"errored": {"message": frame.result.message, "details": frame.result.details}}
        raise WireEncodeError("outcome must be Completed or Errored")
    if isinstance(frame, HookCall):
        return {
            "token": bytes(frame.token),
            "hook": frame.hook,
            "name": frame.name,
            "args": frame.args,
            "deadline_ms": frame.deadline_ms,
        }
    raise WireEncodeError(f"{type(frame).__name__} is not a frame")


def _check_bytes(name: str, b: Any) -> None:
    if not isinstance(b, (bytes, bytearray, memoryview)):
        raise WireEncodeError(f"{name} must be bytes")


def _check_uint(name: str, n: Any) -> None:
    if not _is_uint(n) or n > 0xFFFFFFFFFFFFFFFF:
        raise WireEncodeError(f"{name} must be an integer in 0 .. 2**64-1")


def encode_payload(frame: Frame) -> bytes:
    """The frame's payload (no length prefix), canonical as Airlock writes it."""
    _check_uint("id", frame.id)
    if isinstance(frame, (CapCall, HookCall)):
        _check_uint("deadline_ms", frame.deadline_ms)
        _check_bytes("token", frame.token)
    for name in ("cap", "hook", "name"):
        if hasattr(frame, name) and not isinstance(getattr(frame, name), str):
            raise WireEncodeError(f"{name} must be a str")
    payload = encode_value({"v": VERSION, "id": frame.id, "kind": frame.kind, "body": _body(frame)})
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise WireEncodeError(
            f"frame payload of {len(payload)} bytes exceeds the {MAX_PAYLOAD_BYTES}-byte cap"
        )
    return payload


def encode_frame(frame: Frame) -> bytes:
    """Length prefix and payload: ready to write to the channel."""
    payload = encode_payload(frame)
    return struct.pack(">I", len(payload)) + payload
