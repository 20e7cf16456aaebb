"""Runs the wire conformance vectors (tests/data/wire, docs/wire.md section 7)
through the Python codec, plus round-trip checks of its encoder.

Run: /usr/bin/python3 -B guest/python/tests/test_wire_vectors.py
(ctest runs it as capability.python_wire_vectors; AIRLOCK_WIRE_VECTORS_DIR
overrides where the vectors are read from.)
"""

from __future__ import annotations

import math
import os
import random
import struct
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airlock_cap import wire  # noqa: E402

VECTORS_DIR = Path(
    os.environ.get(
        "AIRLOCK_WIRE_VECTORS_DIR", Path(__file__).resolve().parents[3] / "tests" / "data" / "wire"
    )
)


# ------------------------------------------------------------------ the format


class Vector:
    def __init__(self, file: str, name: str, line: int) -> None:
        self.file = file
        self.name = name
        self.line = line
        self.data = bytearray()
        self.expected: list[str] = []
        self.canonical = False


def _tokens(args: str, out: bytearray) -> None:
    i = 0
    while i < len(args):
        c = args[i]
        if c == " ":
            i += 1
        elif c == '"':
            close = args.index('"', i + 1)
            out += args[i + 1 : close].encode("ascii")
            i = close + 1
        else:
            out.append(int(args[i : i + 2], 16))
            i += 2


def parse_vectors(path: Path) -> list[Vector]:
    vectors: list[Vector] = []
    begin_at = None
    for number, line in enumerate(path.read_text(encoding="ascii").split("\n"), start=1):
        if not line or line.startswith("#"):
            continue
        directive, _, args = line.partition(" ")
        where = f"{path.name}:{number}"
        if directive == "vector":
            assert begin_at is None, f"{where}: begin without end"
            vectors.append(Vector(path.name, args, number))
            continue
        assert vectors, f"{where}: directive before the first vector"
        v = vectors[-1]
        if directive == "bytes":
            _tokens(args, v.data)
        elif directive == "fill":
            count, byte = args.split(" ")
            v.data += bytes([int(byte, 16)]) * int(count)
        elif directive == "begin":
            assert begin_at is None, f"{where}: nested begin"
            begin_at = len(v.data)
        elif directive == "end":
            assert begin_at is not None, f"{where}: end without begin"
            v.data[begin_at:begin_at] = struct.pack(">I", len(v.data) - begin_at)
            begin_at = None
        elif directive == "expect":
            v.expected.append(args)
        elif directive == "canonical":
            v.canonical = True
        else:
            raise AssertionError(f"{where}: unknown directive {directive}")
    assert begin_at is None, f"{path.name}: begin without end"
    return vectors


# ------------------------------------------------------------------ rendering


def render_string(s: str) -> str:
    out = ['"']
    for b in s.encode("utf-8"):
        if 0x20 <= b <= 0x7E and b not in (0x22, 0x5C):
            out.append(chr(b))
        else:
            out.append(f"\\x{b:02x}")
    out.append('"')
    return "".join(out)


def render_value(v) -> str:
    if v is None:
        return "nil"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "f:" + struct.pack(">d", v).hex()
    if isinstance(v, str):
        return render_string(v)
    if isinstance(v, bytes):
        return "b:" + v.hex()
    if isinstance(v, list):
        return "[" + ",".join(render_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(render_string(k) + ":" + render_value(x) for k, x in v.items()) + "}"
    raise AssertionError(f"not a wire value: {v!r}")


def render_answer(a) -> str:
    if isinstance(a, wire.Ok):
        return "ok=" + render_value(a.value)
    return f"error.code={render_string(a.code)} error.message={render_string(a.message)}"


def render_frame(f) -> str:
    head = f"{f.kind} id={f.id}"
    if isinstance(f, wire.CapCall):
        return (
            f"{head} token=b:{f.token.hex()} cap={render_string(f.cap)} "
            f"args={render_value(f.args)} deadline_ms={f.deadline_ms}"
        )
    if isinstance(f, (wire.CapResult, wire.HookResult)):
        return f"{head} {render_answer(f.answer)}"
    if isinstance(f, wire.Cancel):
        return head
    if isinstance(f, wire.Outcome):
        if isinstance(f.result, wire.Completed):
            return f"{head} completed={render_value(f.result.value)}"
        return (
            f"{head} errored.message={render_string(f.result.message)} "
            f"errored.details={render_value(f.result.details)}"
        )
    return (
        f"{head} token=b:{f.token.hex()} hook={render_string(f.hook)} name={render_string(f.name)} "
        f"args={render_value(f.args)} deadline_ms={f.deadline_ms}"
    )


def run_stream(data: bytes, chunk_sizes: list[int], frames: list | None = None) -> list[str]:
    events: list[str] = []
    dec = wire.FrameDecoder()
    pos = 0
    which = 0
    faulted = False
    while not faulted and pos < len(data):
        n = len(data) if not chunk_sizes else max(1, chunk_sizes[which % len(chunk_sizes)])
        which += 1
        dec.feed(data[pos : pos + n])
        pos += n
        while True:
            e = dec.next()
            if e is None:
                break
            if isinstance(e, wire.Fault):
                events.append(f"fault {e.kind}")
                faulted = True
                break
            if isinstance(e, wire.Invalid):
                events.append(f"invalid id={e.id} kind={e.kind}")
            elif isinstance(e, wire.Dropped):
                events.append(f"dropped id={e.id} kind={render_string(e.kind)}")
            else:
                events.append("frame " + render_frame(e))
                if frames is not None:
                    frames.append(e)
    if not faulted:
        events.append("incomplete" if dec.has_partial_frame else "end")
    return events


def matches(expected: str, actual: str) -> bool:
    if expected.endswith(" ..."):
        return actual.startswith(expected[: -len(" ...")])
    return expected == actual


# ------------------------------------------------------------------ tests


class WireVectors(unittest.TestCase):
    def check(self, v: Vector, actual: list[str], how: str) -> None:
        where = f"{v.file}:{v.line} vector {v.name}, fed {how}"
        self.assertEqual(
            len(actual), len(v.expected), f"{where}: events {[a[:200] for a in actual]}"
        )
        for i, (want, got) in enumerate(zip(v.expected, actual)):
            self.assertTrue(
                matches(want, got), f"{where}: event {i}\n  expected: {want}\n  actual:   {got[:500]}"
            )

    def run_file(self, name: str, at_least: int) -> None:
        vectors = parse_vectors(VECTORS_DIR / name)
        self.assertGreaterEqual(len(vectors), at_least)
        self.assertEqual(len({v.name for v in vectors}), len(vectors), "vector names repeat")
        for v in vectors:
            data = bytes(v.data)
            frames: list = []
            self.check(v, run_stream(data, [], frames), "whole")
            if len(data) <= 65536:
                self.check(v, run_stream(data, [1]), "byte by byte")
            rng = random.Random(v.name)
            for _ in range(3):
                top = max(2, len(data) // 3)
                sizes = [1 + rng.randrange(top) for _ in range(16)]
                self.check(v, run_stream(data, sizes), "in random chunks")
            if v.canonical:
                again = b"".join(wire.encode_frame(f) for f in frames)
                self.assertTrue(again == data, f"{v.name}: re-encoding differs from the bytes")

    def test_valid(self) -> None:
        self.run_file("valid.vectors", 20)

    def test_malformed(self) -> None:
        self.run_file("malformed.vectors", 20)

    def test_limits(self) -> None:
        self.run_file("limits.vectors", 8)


class WireCodec(unittest.TestCase):
    def test_values_round_trip(self) -> None:
        rng = random.Random(7)

        def value(depth: int):
            pick = rng.randrange(10 if depth > 0 else 8)
            if pick == 0:
                return None
            if pick == 1:
                return rng.random() < 0.5
            if pick == 2:
                return rng.randrange(-(2**63), 2**64)
            if pick == 3:
                return rng.randrange(-40, 300)
            if pick == 4:
                return struct.unpack(">d", rng.randbytes(8))[0]
            if pick == 5:
                return "".join(chr(rng.choice([0x41, 0xE9, 0x4E2D, 0x1F600, 0x22])) for _ in range(rng.randrange(40)))
            if pick in (6, 7):
                return rng.randbytes(rng.randrange(300))
            if pick == 8:
                return [value(depth - 1) for _ in range(rng.randrange(20))]
            return {f"k{i}": value(depth - 1) for i in range(rng.randrange(20))}

        for _ in range(300):
            v = value(4)
            encoded = wire.encode_value(v)
            back = wire.decode_value(encoded)
            self.assertEqual(render_value(back), render_value(v))
            self.assertEqual(wire.encode_value(back), encoded)

    def test_frames_round_trip(self) -> None:
        frames = [
            wire.CapCall(1, b"tok", "proc.run", {"argv": ["ls", "-l"]}, 5000),
            wire.CapResult(1, wire.Ok({"exit_code": 0, "stdout": b"x\n"})),
            wire.CapResult(2, wire.Refusal("denied", "no")),
            wire.Cancel(3),
            wire.Outcome(0, wire.Completed([1, 2.5, None])),
            wire.Outcome(0, wire.Errored("boom", {"line": 3})),
            wire.HookCall(4, b"\x00", "tool", "lint", None, 0),
            wire.HookResult(4, wire.Refusal("busy", "an invocation is open")),
        ]
        for f in frames:
            event = wire.decode_payload(wire.encode_payload(f))
            self.assertEqual(event, f)

    def test_encoder_refuses_what_the_decoder_would(self) -> None:
        for bad in ({1: "integer key"}, "\ud800", 2**64, -(2**63) - 1, object(), {"k": {2.5}}):
            with self.assertRaises(wire.WireEncodeError):
                wire.encode_value(bad)
        deep: list = []
        for _ in range(wire.MAX_DEPTH):
            deep = [deep]
        with self.assertRaises(wire.WireEncodeError):
            wire.encode_value(deep)
        with self.assertRaises(wire.WireEncodeError):
            wire.encode_value([None] * wire.MAX_VALUES)
        with self.assertRaises(wire.WireEncodeError):
            wire.encode_frame(wire.CapCall(1, "not bytes", "x", None, 0))
        with self.assertRaises(wire.WireEncodeError):
            wire.encode_frame(wire.CapCall(1, b"", "x", b"x" * wire.MAX_PAYLOAD_BYTES, 0))

    def test_nan_survives_bit_for_bit(self) -> None:
        nan = struct.unpack(">d", bytes.fromhex("7ff8000000000001"))[0]
        back = wire.decode_value(wire.encode_value(nan))
        self.assertTrue(math.isnan(back))
        self.assertEqual(struct.pack(">d", back).hex(), "7ff8000000000001")

    def test_decoder_is_total_on_random_bytes(self) -> None:
        rng = random.Random(11)
        base = wire.encode_frame(wire.CapCall(1, b"tok", "fs.read", {"path": "a"}, 10))
        for _ in range(3000):
            data = bytearray(base)
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            # Must not raise, and must agree between whole and byte-wise feeding.
            self.assertEqual(run_stream(bytes(data), []), run_stream(bytes(data), [1]))
            wire.decode_payload(bytes(data[4:]))
        for _ in range(2000):
            wire.decode_payload(rng.randbytes(rng.randrange(64)))


if __name__ == "__main__":
    unittest.main()
