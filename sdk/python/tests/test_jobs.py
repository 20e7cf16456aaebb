"""The job methods of the client (docs/serve.md "Jobs"): against `airlock
serve` with the fake mechanism (which starts no processes: the refusals and
shapes), and, as root, with the linux mechanism (a job started here is read
by a program, and a job a program started is polled and killed here)."""

import os
import time
import unittest

from airlock_client import (
    ExecutionRejectedError,
    ExecutionUnavailableError,
    Job,
    NotFoundError,
    ToolValidationError,
)
from airlock_client.testing import ServeProcess

from .support import require_binary


class JobRoutesFakeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.serve = ServeProcess(require_binary(), sandbox="fake")
        cls.client = cls.serve.client()

    @classmethod
    def tearDownClass(cls):
        status = cls.serve.stop()
        if status != 0:
            raise AssertionError(f"airlock serve exited with {status}:\n{cls.serve.log()}")

    def test_refusals_and_an_empty_listing(self):
        with self.client.environment("t-jobs", "r-jobs") as env:
            # The fake mechanism starts no side processes.
            with self.assertRaises(ExecutionUnavailableError):
                env.start_job(["sleep", "1"])
            with self.assertRaises(TypeError):
                env.start_job("sleep 1")
            self.assertEqual(env.list_jobs(), [])
            with self.assertRaises(NotFoundError) as caught:
                env.poll_job("job-7")
            self.assertIn("job-7", caught.exception.message)
            with self.assertRaises(NotFoundError):
                env.send_job_input("job-7", "x", last=True)
            with self.assertRaises(NotFoundError):
                env.kill_job("job-7")
            with self.assertRaises(ToolValidationError) as caught:
                env.poll_job("job-7", wait_ms=60001)
            self.assertIn("wait_ms", caught.exception.message)
            with self.assertRaises(ToolValidationError) as caught:
                env.start_job(["sh"], pty={"rows": 24, "columns": 0})
            self.assertIn("pty.columns", caught.exception.message)
            with self.assertRaises(ToolValidationError) as caught:
                env.resize_job("job-7", 0, 80)
            self.assertIn("rows", caught.exception.message)
            with self.assertRaises(NotFoundError):
                env.resize_job("job-7", 24, 80)
        with self.assertRaises(NotFoundError):
            self.client.list_jobs("no-such-environment")

    def test_a_job_value_is_taken_back_in_place_of_its_id(self):
        started = Job.from_json({"job_id": "job-9", "stdout_cursor": 0, "stderr_cursor": 0,
                                 "wall_ms": 1000, "deadline": "2026-12-07T18:40:00.000Z"}, argv=["true"])
        self.assertEqual((started.job_id, started.state, started.pending), ("job-9", "running", True))
        self.assertEqual((started.stdout.cursor, started.argv), (0, ["true"]))
        # The start's answer reads as the dict it used to be.
        self.assertEqual((started["job_id"], started["wall_ms"]), ("job-9", 1000))
        self.assertIn("deadline", started)
        self.assertIsNone(started.get("state"))
        with self.client.environment("t-jobs", "r-jobs-typed") as env:
            for call in (lambda: env.poll_job(started), lambda: env.kill_job(started),
                         lambda: env.send_job_input(started, "x")):
                with self.assertRaises(NotFoundError) as caught:
                    call()
                self.assertIn("job-9", caught.exception.message)
            with self.assertRaises(ToolValidationError) as caught:
                env.poll_job(started, stdout_cursor=-1)
            self.assertEqual(caught.exception.message, "stdout_cursor must be a whole number, 0 or more")
            with self.assertRaises(ToolValidationError) as caught:
                env.start_job(["true"], wall_ms=-1)
            self.assertEqual(caught.exception.message,
                             "wall_ms must be a whole number of milliseconds, 0 or more")


@unittest.skipUnless(hasattr(os, "geteuid") and os.geteuid() == 0, "the linux mechanism needs root")
class JobsLinuxTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.serve = ServeProcess(require_binary(), sandbox="linux")
        cls.client = cls.serve.client()

    @classmethod
    def tearDownClass(cls):
        status = cls.serve.stop()
        if status != 0:
            raise AssertionError(f"airlock serve exited with {status}:\n{cls.serve.log()}")

    def poll_until(self, env, job_id, done, cursors=(0, 0)):
        out, err = b"", b""
        deadline = time.monotonic() + 60
        while True:
            job = env.poll_job(job_id, stdout_cursor=cursors[0], stderr_cursor=cursors[1], wait_ms=5000)
            out += job.stdout.data
            err += job.stderr.data
            cursors = (job.stdout.cursor, job.stderr.cursor)
            if done(job, out) or time.monotonic() > deadline:
                return job, out, err

    def test_a_job_started_here_is_fed_here_and_read_by_a_program(self):
        with self.client.environment("t-jobs", "r-jobs-1") as env:
            started = env.start_job(["sh", "-c", "echo ready; read line; echo got-$line"], wall_ms=60000)
            self.assertIsInstance(started, Job)
            self.assertEqual((started.stdout.cursor, started.stderr.cursor), (0, 0))
            self.assertEqual((started["stdout_cursor"], started["stderr_cursor"]), (0, 0))
            self.assertEqual((started.wall_ms, started["wall_ms"]), (60000, 60000))
            self.assertEqual((started.state, started.pending), ("running", True))
            job_id = started.job_id
            job, out, _ = self.poll_until(env, started, lambda j, o: b"ready\n" in o)
            self.assertEqual(out, b"ready\n")
            self.assertEqual(job.state, "running")
            env.send_job_input(job, "ping\n", last=True)
            with self.assertRaises(ExecutionRejectedError):
                env.send_job_input(started, "more")
            job, out, _ = self.poll_until(env, job_id, lambda j, o: not j.pending,
                                          (job.stdout.cursor, job.stderr.cursor))
            self.assertEqual(out, b"got-ping\n")
            self.assertEqual((job.state, job.exit_code), ("exited", 0))
            done = env.run_code(
                "from airlock_cap import job, Job\n"
                "def main():\n"
                f"    st = job.poll(Job('{job_id}'))\n"
                "    return {'out': st.stdout, 'state': st.state, 'ids': [r['job_id'] for r in job.list()]}\n")
            self.assertEqual(done.value, {"out": "ready\ngot-ping\n", "state": "exited", "ids": [job_id]})

    def test_a_job_a_program_started_is_polled_and_killed_here(self):
        with self.client.environment("t-jobs", "r-jobs-2") as env:
            done = env.run_code(
                "from airlock_cap import job\n"
                "def main():\n"
                "    j = job.start_for_session(['sh', '-c', 'echo up; exec sleep 600'])\n"
                "    job.wait(j, timeout_ms=20000)\n"
                "    return {'id': j.job_id, 'wall_ms': j.wall_ms}\n")
            job_id = done.value["id"]
            self.assertEqual(done.value["wall_ms"], 0)
            listed = env.list_jobs()
            self.assertEqual([(j.job_id, j.state) for j in listed], [(job_id, "running")])
            self.assertIsInstance(listed[0], Job)
            self.assertEqual(listed[0].stdout.cursor, 3)
            env.kill_job(job_id)
            job, out, _ = self.poll_until(env, job_id, lambda j, o: not j.pending)
            self.assertEqual((job.state, job.kill_reason), ("killed", "requested"))
            self.assertEqual(out, b"up\n")
            self.assertEqual(job.spill["stdout"]["size_bytes"], 3)
            self.assertIsNotNone(job.spill["stdout"]["artifact_id"])

    def test_a_pty_job_is_typed_into_and_resized_here(self):
        with self.client.environment("t-jobs", "r-jobs-3") as env:
            started = env.start_job(["sh", "-i"], pty={"rows": 24, "columns": 80})
            job_id = started["job_id"]
            env.send_job_input(job_id, "stty size\n")
            job, out, _ = self.poll_until(env, job_id, lambda j, o: b"24 80\r\n" in o)
            self.assertIn(b"24 80\r\n", out)
            self.assertEqual(job.pty, {"rows": 24, "columns": 80})
            env.resize_job(job_id, 40, 132)
            env.send_job_input(job_id, "stty size\n")
            cursors = (job.stdout.cursor, job.stderr.cursor)
            job, out, _ = self.poll_until(env, job_id, lambda j, o: b"40 132\r\n" in o, cursors)
            self.assertIn(b"40 132\r\n", out)
            self.assertEqual(job.pty, {"rows": 40, "columns": 132})
            env.send_job_input(job_id, last=True)  # ^D: the shell exits
            job, _, err = self.poll_until(env, job_id, lambda j, o: not j.pending)
            self.assertEqual(job.state, "exited")
            self.assertEqual(err, b"")
            with self.assertRaises(ExecutionRejectedError):
                env.resize_job(job_id, 10, 10)


if __name__ == "__main__":
    unittest.main()
