"""Tests of the guest library's own logic (airlock_cap): the proc.stdout
reduction and its cuts, error classes keeping refusal names, and the channel
against an in-process broker double speaking the wire. Standard library only;
run with /usr/bin/python3 (ctest: capability.python_guest_library)."""

import os
import random
import socket
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import airlock_cap as cap  # noqa: E402
from airlock_cap import wire  # noqa: E402


def result(**kw):
    base = dict(argv=["sh", "-c", "x"], exit_code=0, signal=None, stdout="out", stderr="",
                timed_out=False, stdout_truncated=False, stderr_truncated=False, duration_ms=1)
    base.update(kw)
    return cap.RunResult(**base)


class CutTest(unittest.TestCase):
    def test_cuts_stay_within_their_byte_limits_ellipsis_included(self):
        rng = random.Random(9)
        alphabet = "aé€😀 \n"
        for _ in range(2000):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 300)))
            limit = rng.randrange(3, 200)
            front, back = cap.cut_front(text, limit), cap.cut_back(text, limit)
            self.assertLessEqual(len(front.encode()), limit)
            self.assertLessEqual(len(back.encode()), limit)
            if len(text.encode()) <= limit:
                self.assertEqual(front, text)
                self.assertEqual(back, text)
            else:
                self.assertTrue(front.endswith("...") and text.startswith(front[:-3]))
                self.assertTrue(back.startswith("...") and text.endswith(back[3:]))


class StdoutFromTest(unittest.TestCase):
    def test_success_is_the_stdout(self):
        self.assertEqual(cap.stdout_from(result(stdout="hi\n")), "hi\n")
        self.assertEqual(cap.stdout_from(result(stdout=b"\xffx"), ), "\ufffdx")

    def test_accepted_exit_codes(self):
        self.assertEqual(cap.stdout_from(result(exit_code=1, stdout="d"), accept=(0, 1)), "d")

    def test_failure_is_one_bounded_string_naming_command_exit_and_stderr_end(self):
        r = result(argv=["prog"] + ["a" * 50] * 10, exit_code=3, stderr="e" * 1000 + "THE END")
        with self.assertRaises(cap.ProcFailed) as ctx:
            cap.stdout_from(r)
        m = ctx.exception.message
        self.assertIn("exited with 3", m)
        self.assertTrue(m.endswith("THE END"))
        command, _, rest = m.partition(" exited with 3: ")
        self.assertLessEqual(len(command.encode()), 160)
        self.assertLessEqual(len(rest.encode()), 400)
        self.assertEqual(ctx.exception.code, "proc_failed")

    def test_a_timeout_is_always_an_error(self):
        with self.assertRaises(cap.ProcFailed) as ctx:
            cap.stdout_from(result(timed_out=True, exit_code=None, signal=9))
        self.assertIn("timed out", ctx.exception.message)

    def test_killed_by_signal(self):
        with self.assertRaises(cap.ProcFailed) as ctx:
            cap.stdout_from(result(exit_code=None, signal=9))
        self.assertIn("signal 9", ctx.exception.message)


class ErrorTest(unittest.TestCase):
    def test_each_refusal_keeps_its_name(self):
        for code, cls in [("denied", cap.Denied), ("spawn_ceiling_reached", cap.SpawnCeilingReached),
                          ("deadline_exceeded", cap.DeadlineExceeded), ("bad_token", cap.BadToken)]:
            e = cap.error_for(code, "m")
            self.assertIsInstance(e, cls)
            self.assertIsInstance(e, cap.CapError)
            self.assertEqual(e.code, code)
            self.assertEqual(e.message, "m")

    def test_net_and_schedule_refusals_keep_their_names(self):
        for code, cls in [("host_not_allowed", cap.HostNotAllowed), ("mode_deny", cap.ModeDeny),
                          ("invalid_schedule", cap.InvalidSchedule), ("redirect_denied", cap.RedirectDenied)]:
            e = cap.error_for(code, "m")
            self.assertIsInstance(e, cls)
            self.assertEqual(e.code, code)
        e = cap.error_for("resolved_denied:metadata", "m")
        self.assertIsInstance(e, cap.ResolvedDenied)
        self.assertEqual(e.code, "resolved_denied:metadata")
        e = cap.error_for("brand_new:thing", "m")
        self.assertIs(type(e), cap.CapError)
        self.assertEqual(e.code, "brand_new:thing")

    def test_an_unknown_code_arrives_as_itself(self):
        e = cap.error_for("brand_new_refusal", "m")
        self.assertIs(type(e), cap.CapError)
        self.assertEqual(e.code, "brand_new_refusal")


def job_answer(spill):
    stream = {"data": "", "cursor": 7, "dropped": 0}
    return {"job_id": "job-1", "state": "exited", "exit_code": 0, "pending": spill is None,
            "stdout": stream, "stderr": dict(stream, cursor=0), "spill": spill}


class JobSpillTest(unittest.TestCase):
    def test_a_pending_job_has_no_spill(self):
        j = cap.Job("job-1")
        st = cap.job._state(j, job_answer(None))
        self.assertIsNone(st.spill)
        self.assertEqual((j.stdout_cursor, j.stderr_cursor), (7, 0))

    def test_a_stored_stream_and_a_failed_one(self):
        digest = "ab" * 32
        st = cap.job._state(cap.Job("job-1"), job_answer({
            "stdout": {"artifact_id": "0190a0c0-0000-7000-8000-000000000000", "media_type": "text/plain; charset=utf-8",
                       "sha256": digest, "size_bytes": 7, "truncated": False, "dropped_bytes": 0},
            "stderr": "no artifact store is configured for job output"}))
        self.assertIsInstance(st.spill, cap.Spill)
        self.assertEqual(st.spill.stdout, cap.SpilledStream("0190a0c0-0000-7000-8000-000000000000",
                                                            "text/plain; charset=utf-8", digest, 7, False, 0))
        self.assertEqual(st.spill.stderr, "no artifact store is configured for job output")

    def test_a_job_is_named_by_a_job_an_id_or_a_listing_row(self):
        j = cap.Job("job-3", 5, 2)
        self.assertIs(cap._job(j), j)
        self.assertEqual(cap._job("job-4"), cap.Job("job-4"))
        self.assertEqual(cap._job({"job_id": "job-5", "state": "running"}), cap.Job("job-5"))
        with self.assertRaisesRegex(TypeError, "a job is a Job, a job id"):
            cap._job(7)
        with self.assertRaises(TypeError):
            cap._job({"state": "running"})

    def test_an_empty_stream_has_no_artifact(self):
        empty = {"artifact_id": None, "media_type": None,
                 "sha256": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                 "size_bytes": 0, "truncated": False, "dropped_bytes": 0}
        st = cap.job._state(cap.Job("job-1"), job_answer({"stdout": empty, "stderr": empty}))
        self.assertIsNone(st.spill.stdout.artifact_id)
        self.assertEqual(st.spill.stderr.size_bytes, 0)


class BrokerDouble:
    """Answers cap_calls: echo.* with its args, anything else refused with
    the capability's name as the code."""

    def __init__(self, path):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(1)
        self.calls = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        conn, _ = self.listener.accept()
        decoder = wire.FrameDecoder()
        while True:
            data = conn.recv(65536)
            if not data:
                return
            decoder.feed(data)
            while True:
                ev = decoder.next()
                if ev is None:
                    break
                if isinstance(ev, wire.CapCall):
                    self.calls.append(ev)
                    if ev.cap.startswith("echo."):
                        answer = wire.Ok(ev.args)
                    else:
                        answer = wire.Refusal(ev.cap, "refused by the double")
                    conn.sendall(wire.encode_frame(wire.CapResult(ev.id, answer)))


class ChannelTest(unittest.TestCase):
    def test_calls_carry_the_token_and_refusals_become_named_errors(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "cap.sock")
            double = BrokerDouble(path)
            ch = cap.Channel(path, b"tok")
            self.assertEqual(ch.call("echo.x", {"a": [1, b"b"]}, 1000), {"a": [1, b"b"]})
            with self.assertRaises(cap.SpawnCeilingReached):
                ch.call("spawn_ceiling_reached", None, 1000)
            with self.assertRaises(cap.CapError) as ctx:
                ch.call("some_future_code", None, 1000)
            self.assertEqual(ctx.exception.code, "some_future_code")
            self.assertEqual([c.token for c in double.calls], [b"tok"] * 3)
            self.assertEqual([c.id for c in double.calls], [1, 2, 3])
            ch.close()
            with self.assertRaises(cap.ChannelClosed):
                ch.call("echo.x", None, 1000)


if __name__ == "__main__":
    unittest.main()
