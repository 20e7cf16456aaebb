"""The Python client against a running `airlock serve` (fake mechanism):
every method, the error mapping on real responses, token sources and the
environment context manager."""

import datetime
import hashlib
import http.server
import io
import os
import socket
import tarfile
import threading
import time
import unittest
import uuid
from unittest import mock

from airlock_client import (
    AirlockClient,
    ArtifactIntegrityError,
    ArtifactMetadata,
    AirlockConnectionError,
    AirlockError,
    DirEntry,
    Environment,
    EnvironmentHandle,
    ExecutionRejectedError,
    ExecutionResult,
    ExecutionUnavailableError,
    Lease,
    NotFoundError,
    ResourceLimits,
    ToolValidationError,
    UnauthorizedError,
    WorkspaceEscapeError,
)
from airlock_client.testing import ServeProcess

from .support import require_binary

TENANT = "tenant-sdk"


def unique_run() -> str:
    return "run-" + uuid.uuid4().hex[:12]


class ClientTest(unittest.TestCase):
    serve: ServeProcess
    client: AirlockClient

    @classmethod
    def setUpClass(cls):
        binary = require_binary()
        # A 1 s reaper so that the stale-lease test sees it act quickly.
        # A hard cap above the 30-minute lifetime so that extend has room.
        cls.serve = ServeProcess(
            binary, sandbox="fake", env={"AIRLOCK_REAPER_INTERVAL": "1s", "AIRLOCK_ENVIRONMENT_HARD_CAP": "1h"}
        )
        cls.client = cls.serve.client()

    @classmethod
    def tearDownClass(cls):
        try:
            leftover = cls.client.list_environments()
        finally:
            status = cls.serve.stop()
        if leftover:
            raise AssertionError(f"tests left environments behind: {leftover}")
        if status != 0:
            raise AssertionError(f"airlock serve exited with {status}:\n{cls.serve.log()}")

    def provision(self, **kwargs) -> EnvironmentHandle:
        tenant = kwargs.pop("tenant_id", TENANT)
        handle = self.client.provision(tenant, kwargs.pop("run_id", unique_run()), **kwargs)
        self.addCleanup(self.client.destroy, handle.environment_id)
        return handle

    # --- service ---------------------------------------------------------

    def test_health_needs_no_token(self):
        with mock.patch.dict(os.environ, {}, clear=True):
            anonymous = AirlockClient(self.serve.url)
        self.assertEqual(anonymous.health(), {"status": "ok"})

    def test_metrics_text_is_prometheus(self):
        handle = self.provision()
        self.client.execute(handle.environment_id, ["true"])
        text = self.client.metrics_text()
        self.assertIn("# TYPE airlock_http_requests_total counter", text)
        self.assertRegex(text, r'airlock_executions_total\{killed_by="none"\} [1-9]')

    # --- environments ----------------------------------------------------

    def test_provision_get_list_destroy(self):
        run = unique_run()
        handle = self.client.provision(TENANT, run, lease_epoch=3, limits=ResourceLimits(memory_bytes=64 << 20))
        self.assertIsInstance(handle, EnvironmentHandle)
        self.assertEqual((handle.tenant_id, handle.run_id, handle.lease_epoch), (TENANT, run, 3))
        self.assertEqual(len(handle.environment_id), 36)
        self.assertIsInstance(handle.created_at, datetime.datetime)
        self.assertEqual(handle.created_at.tzinfo, datetime.timezone.utc)
        self.assertLess(handle.created_at, handle.expires_at)

        self.assertEqual(self.client.get(handle.environment_id), handle)
        self.assertIn(handle, self.client.list_environments())
        # Every answer says how far an extension can go, not only extend's.
        self.assertIsNotNone(handle.max_expires_at)
        self.assertEqual(handle.max_expires_at, handle.created_at + datetime.timedelta(hours=1))

        self.client.destroy(handle.environment_id)
        self.assertNotIn(handle.environment_id, [h.environment_id for h in self.client.list_environments()])
        with self.assertRaises(NotFoundError) as caught:
            self.client.get(handle.environment_id)
        self.assertEqual(caught.exception.code, "not_found")
        self.assertEqual(caught.exception.status, 404)
        self.assertIn(handle.environment_id, caught.exception.message)
        # Idempotent.
        self.client.destroy(handle.environment_id)

    def test_extend_moves_expires_at_later_up_to_the_hard_cap(self):
        handle = self.provision()
        self.assertEqual(handle.expires_at - handle.created_at, datetime.timedelta(minutes=30))
        extended = self.client.extend(handle.environment_id, 45 * 60)
        self.assertGreater(extended.expires_at, handle.expires_at)
        self.assertEqual(extended.max_expires_at, handle.created_at + datetime.timedelta(hours=1))
        self.assertEqual(self.client.get(handle.environment_id).expires_at, extended.expires_at)
        clamped = self.client.extend(handle.environment_id, 3600)
        self.assertEqual(clamped.expires_at, clamped.max_expires_at)
        self.assertEqual(self.client.extend(handle.environment_id, 1).expires_at, clamped.expires_at)
        with self.assertRaises(ToolValidationError):
            self.client.extend(handle.environment_id, 3601)
        with self.assertRaises(NotFoundError):
            self.client.extend("0190c5a4-0000-7000-8000-000000000000", 60)
        env = Environment(self.client, handle)
        self.assertEqual(env.extend(60).expires_at, clamped.expires_at)
        self.assertEqual(env.handle.expires_at, clamped.expires_at)

    def test_a_run_without_notes_lists_none_and_a_key_is_not_found(self):
        # The fake mechanism runs no programs: only the empty side is seen
        # here (tests/capability and tests/service put notes).
        run = unique_run()
        self.assertEqual(self.client.list_notes(TENANT, run), [])
        self.assertEqual(self.client.list_notes(TENANT, run, prefix="a/"), [])
        with self.assertRaises(NotFoundError) as caught:
            self.client.get_note(TENANT, run, "plan/next")
        self.assertIn("plan/next", caught.exception.message)

    def test_images_lists_the_default_and_an_environment_says_its_image(self):
        images = self.client.images()
        self.assertEqual([i["name"] for i in images], ["host"])
        self.assertTrue(images[0]["default"])
        self.assertRegex(images[0]["digest"], r"^sha256:[0-9a-f]{64}$")
        handle = self.provision(image="host")
        self.assertEqual(handle.image_digest, images[0]["digest"])
        self.assertEqual(self.client.get(handle.environment_id).image_digest, images[0]["digest"])
        with self.assertRaises(ExecutionRejectedError) as caught:
            self.client.provision(TENANT, unique_run(), image="no-such-image")
        self.assertIn('unknown image "no-such-image"', caught.exception.message)

    def test_provision_with_limits_as_dict_and_environment(self):
        handle = self.provision(limits={"pids_max": 64, "wall_clock_seconds": 10}, environment={"GREETING": "hi"})
        self.assertEqual(self.client.get(handle.environment_id).environment_id, handle.environment_id)

    # --- execute ---------------------------------------------------------

    def test_execute_returns_a_typed_result(self):
        handle = self.provision()
        result = self.client.execute(handle.environment_id, ["echo", "hello", "world"])
        self.assertIsInstance(result, ExecutionResult)
        self.assertEqual(result.exit_code, 0)
        self.assertTrue(result.ok)
        self.assertEqual(result.stdout, b"hello world\n")
        self.assertEqual(result.stdout_text, "hello world\n")
        self.assertEqual(result.stderr, b"")
        self.assertIsNone(result.killed_by)
        self.assertFalse(result.timed_out or result.stdout_truncated or result.stderr_truncated)
        self.assertEqual(result.files_changed, [])
        self.assertEqual(result.output_held_open, [])

    def test_a_result_names_the_streams_a_background_process_held_open(self):
        # What `sh -c 'sleep 60 & echo started'` answers on a real mechanism.
        result = ExecutionResult.from_json(
            {"exit_code": 0, "stdout": "started\n", "stderr": "", "stdout_truncated": False,
             "stderr_truncated": False, "timed_out": False, "killed_by": None,
             "files_changed": [], "files_changed_truncated": False,
             "output_held_open": ["stdout", "stderr"], "duration_ms": 2004})
        self.assertTrue(result.ok)
        self.assertEqual(result.output_held_open, ["stdout", "stderr"])

    def test_execute_failure_is_a_result_not_an_exception(self):
        handle = self.provision()
        result = self.client.execute(handle.environment_id, ["false"])
        self.assertEqual(result.exit_code, 1)
        self.assertFalse(result.ok)
        missing = self.client.execute(handle.environment_id, ["no-such-command"])
        self.assertEqual(missing.exit_code, 127)
        self.assertIn(b"not found", missing.stderr)

    def test_execute_sends_binary_stdin_and_decodes_binary_output(self):
        handle = self.provision()
        data = b"\xff\x00 not utf-8 \xc3"
        result = self.client.execute(handle.environment_id, ["cat"], stdin=data)
        self.assertEqual(result.stdout, data)
        text = self.client.execute(handle.environment_id, ["cat"], stdin="caf\u00e9\n")
        self.assertEqual(text.stdout, "caf\u00e9\n".encode())

    def test_execute_timeout_and_output_cap(self):
        handle = self.provision()
        killed = self.client.execute(handle.environment_id, ["sleep", "5"], timeout_seconds=1)
        self.assertIsNone(killed.exit_code)
        self.assertEqual(killed.killed_by, "TIMEOUT")
        self.assertTrue(killed.timed_out)
        capped = self.client.execute(handle.environment_id, ["echo", "x" * 100], maximum_output_bytes=10)
        self.assertEqual(capped.killed_by, "OUTPUT_LIMIT")
        self.assertTrue(capped.stdout_truncated)
        self.assertEqual(capped.stdout, b"x" * 10)

    def test_execute_env_reaches_only_its_command(self):
        handle = self.provision()
        seen = self.client.execute(handle.environment_id, ["printenv", "GREETING"], env={"GREETING": "hi"})
        self.assertEqual(seen.stdout, b"hi\n")
        after = self.client.execute(handle.environment_id, ["printenv", "GREETING"])
        self.assertEqual(after.exit_code, 1, "the variable outlived its command")
        with self.assertRaises(ToolValidationError) as caught:
            self.client.execute(handle.environment_id, ["true"], env={"GITHUB_TOKEN": "x"})
        self.assertIn("GITHUB_TOKEN", str(caught.exception))

    def test_execute_in_a_working_directory(self):
        handle = self.provision()
        self.client.write_file(handle.environment_id, "sub/dir/file.txt", b"x")
        result = self.client.execute(handle.environment_id, ["true"], working_directory="sub/dir")
        self.assertEqual(result.exit_code, 0)
        with self.assertRaises(ToolValidationError):
            self.client.execute(handle.environment_id, ["true"], working_directory="missing")

    def test_execute_refuses_a_string_argv_before_sending(self):
        handle = self.provision()
        with self.assertRaises(TypeError):
            self.client.execute(handle.environment_id, "echo hi")

    # --- workspace -------------------------------------------------------

    def test_write_read_list_provenance(self):
        handle = self.provision()
        env_id = handle.environment_id
        self.client.write_file(env_id, "notes.txt", "caf\u00e9\n")
        self.client.write_file(env_id, "data/blob.bin", bytes(range(256)))
        self.assertEqual(self.client.read_file(env_id, "notes.txt"), "caf\u00e9\n".encode())
        self.assertEqual(self.client.read_file(env_id, "data/blob.bin"), bytes(range(256)))

        entries = self.client.list_dir(env_id)
        self.assertTrue(all(isinstance(e, DirEntry) for e in entries))
        by_name = {e.name: e for e in entries}
        self.assertEqual(by_name["notes.txt"].type, "file")
        self.assertEqual(by_name["notes.txt"].size_bytes, len("caf\u00e9\n".encode()))
        self.assertTrue(by_name["data"].is_dir)
        self.assertEqual(self.client.list_dir(env_id, "data"), [DirEntry("blob.bin", "file", 256)])

        self.assertEqual(self.client.provenance(env_id, "notes.txt"), "TOOL_WRITTEN")

    def test_remove_rename_stat_and_make_dir(self):
        handle = self.provision()
        env_id = handle.environment_id
        self.client.make_dir(env_id, "d/e")
        self.client.write_file(env_id, "d/e/f.txt", "12345")
        status = self.client.stat_path(env_id, "d/e/f.txt")
        self.assertEqual((status.type, status.size_bytes, status.mode), ("file", 5, 0o644))
        self.assertEqual(status.path, "d/e/f.txt")
        self.assertLess(abs(status.mtime.timestamp() - status.mtime_ns / 1e9), 0.002)
        self.assertTrue(self.client.stat_path(env_id, "d").is_dir)

        self.client.write_file(env_id, "other.txt", "other")
        with self.assertRaises(ExecutionRejectedError) as caught:
            self.client.rename_path(env_id, "d/e/f.txt", "other.txt")
        self.assertIn('"other.txt" already exists', str(caught.exception))
        self.client.rename_path(env_id, "d/e/f.txt", "other.txt", replace=True)
        self.assertEqual(self.client.read_file(env_id, "other.txt"), b"12345")
        self.assertEqual(self.client.provenance(env_id, "other.txt"), "TOOL_WRITTEN")
        self.client.rename_path(env_id, "other.txt", b"raw-\xff.txt")
        self.assertEqual(self.client.stat_path(env_id, "raw-\udcff.txt").size_bytes, 5)

        with self.assertRaises(ExecutionRejectedError):
            self.client.remove_path(env_id, "d")  # not empty
        self.client.remove_path(env_id, "d", recursive=True)
        self.client.remove_path(env_id, "raw-\udcff.txt")
        self.assertEqual(self.client.list_dir(env_id), [])
        with self.assertRaises(NotFoundError) as missing:
            self.client.stat_path(env_id, "d")
        self.assertIn('"d"', str(missing.exception))
        with self.assertRaises(WorkspaceEscapeError):
            self.client.remove_path(env_id, "../outside", recursive=True)
        with self.assertRaises(WorkspaceEscapeError):
            self.client.rename_path(env_id, "x", "../x")
        with self.assertRaises(ToolValidationError):
            self.client.remove_path(env_id, ".", recursive=True)

    def test_the_environment_wrapper_has_the_path_methods(self):
        with self.client.environment(TENANT, unique_run()) as env:
            env.make_dir("a")
            env.write_file("a/f", "f")
            env.rename_path("a/f", "a/g")
            self.assertEqual(env.stat_path("a/g").size_bytes, 1)
            env.remove_path("a", recursive=True)
            self.assertEqual(env.list_dir(), [])

    def test_archive_upload_refuses_a_bad_member_and_download_streams_it_back(self):
        handle = self.provision()
        env_id = handle.environment_id

        def tar_of(*members: tuple[str, bytes | None]) -> bytes:
            buffer = io.BytesIO()
            with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
                for name, data in members:
                    info = tarfile.TarInfo(name)
                    if data is None:
                        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                    else:
                        info.size = len(data)
                    tar.addfile(info, io.BytesIO(data or b""))
            return buffer.getvalue()

        self.client.upload_archive(env_id, "proj", tar_of(("src/a.py", b"a"), ("b.txt", b"bb")))
        self.assertEqual(self.client.read_file(env_id, "proj/src/a.py"), b"a")
        self.assertEqual(self.client.provenance(env_id, "proj/b.txt"), "UNKNOWN")
        with self.assertRaises(ToolValidationError) as caught:
            self.client.upload_archive(env_id, "other", tar_of(("ok", b"ok"), ("lnk", None)))
        self.assertIn('archive member "lnk" is a symlink', str(caught.exception))
        with self.assertRaises(ToolValidationError):
            self.client.upload_archive(env_id, "other", tar_of(("../up", b"x")))
        with self.assertRaises(NotFoundError):
            self.client.stat_path(env_id, "other")
        with self.assertRaises(WorkspaceEscapeError):
            self.client.upload_archive(env_id, "../x", tar_of(("a", b"a")))

        # Out again, through the server's streamed response.
        with tarfile.open(fileobj=io.BytesIO(self.client.download_archive(env_id, "proj"))) as tar:
            files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
            dirs = {m.name for m in tar.getmembers() if m.isdir()}
        self.assertEqual(files, {"src/a.py": b"a", "b.txt": b"bb"})
        self.assertEqual(dirs, {"src"})
        big = os.urandom(3 << 20)
        self.client.write_file(env_id, "proj/big.bin", big)
        with tarfile.open(fileobj=io.BytesIO(self.client.download_archive(env_id, "."))) as tar:
            self.assertEqual(tar.extractfile("proj/big.bin").read(), big)

    def test_paths_are_percent_encoded_completely(self):
        handle = self.provision()
        env_id = handle.environment_id
        # Characters that mean something in a query: & = + % # ? and space.
        name = "a b&c=d+e%20f#g?h.txt"
        self.client.write_file(env_id, name, b"tricky")
        self.assertEqual(self.client.read_file(env_id, name), b"tricky")
        self.assertIn(name, [e.name for e in self.client.list_dir(env_id)])

    def test_a_non_utf8_name_round_trips(self):
        handle = self.provision()
        env_id = handle.environment_id
        self.client.write_file(env_id, b"raw-\xff.bin", b"\x00\x01")
        names = [e.name for e in self.client.list_dir(env_id)]
        self.assertIn("raw-\udcff.bin", names)  # surrogateescape, like os.fsdecode
        self.assertEqual(self.client.read_file(env_id, "raw-\udcff.bin"), b"\x00\x01")

    # --- error mapping on real responses ----------------------------------

    def test_wrong_token_is_unauthorized(self):
        bad = AirlockClient(self.serve.url, token="not-the-token-at-all")
        with self.assertRaises(UnauthorizedError) as caught:
            bad.list_environments()
        self.assertEqual((caught.exception.code, caught.exception.status), ("unauthorized", 401))
        with mock.patch.dict(os.environ, {}, clear=True):
            none = AirlockClient(self.serve.url)
        with self.assertRaises(UnauthorizedError):
            none.provision(TENANT, unique_run())

    def test_not_found(self):
        handle = self.provision()
        with self.assertRaises(NotFoundError):
            self.client.read_file(handle.environment_id, "missing.txt")
        with self.assertRaises(NotFoundError):
            self.client.execute("01a22b00-0000-7000-8000-000000000000", ["true"])

    def test_workspace_escape(self):
        handle = self.provision()
        for path in ["../outside", "/etc/passwd", "a/../../b"]:
            with self.subTest(path=path), self.assertRaises(WorkspaceEscapeError) as caught:
                self.client.read_file(handle.environment_id, path)
            self.assertEqual(caught.exception.code, "workspace_escape")
            self.assertEqual(caught.exception.status, 400)
        with self.assertRaises(WorkspaceEscapeError):
            self.client.write_file(handle.environment_id, "../x", b"no")

    def test_tool_validation_error(self):
        handle = self.provision()
        with self.assertRaises(ToolValidationError) as caught:
            self.client.execute(handle.environment_id, [])
        self.assertIn("argv", caught.exception.message)
        with self.assertRaises(ToolValidationError):
            self.client.provision(TENANT, "bad run id with spaces")
        with self.assertRaises(ToolValidationError) as caught:
            self.client.provision(TENANT, unique_run(), environment={"AWS_SECRET_ACCESS_KEY": "x"})
        self.assertIn("credential", caught.exception.message)
        with self.assertRaises(ToolValidationError):
            self.client.provision(TENANT, unique_run(), limits={"not_a_limit": 1})

    def test_execution_rejected(self):
        with self.assertRaises(ExecutionRejectedError) as caught:
            self.client.provision(TENANT, unique_run(), limits=ResourceLimits(memory_bytes=1 << 50))
        self.assertEqual((caught.exception.code, caught.exception.status), ("execution_rejected", 409))
        self.assertIn("memory_bytes", caught.exception.message)

    def test_code_mode_routes(self):
        # The fake mechanism has no capability channel: a program is refused
        # as unavailable; the schedule routes answer with empty lists.
        with self.client.environment("t-code", "r-code") as env:
            with self.assertRaises(ExecutionUnavailableError):
                env.run_code("def main():\n    return 1\n", capabilities=["notes.*"])
            with self.assertRaises(TypeError):
                env.run_code("def main(): pass", capabilities="proc.run")
            self.assertEqual(env.list_schedules(), [])
            with self.assertRaises(NotFoundError):
                env.cancel_schedule("nothing")
        self.assertEqual(self.client.schedule_fires(after=0, limit=10), [])
        self.assertEqual(self.client.acknowledge_fires(0), 0)
        with self.assertRaises(ToolValidationError):
            self.client.schedule_fires(limit=0)

    def test_an_execution_is_named_and_its_cancel_reaches_the_environment(self):
        handle = self.provision()
        result = self.client.execute(handle.environment_id, ["echo", "named"], execution_id="exec-1")
        self.assertEqual(result.stdout_text, "named\n")
        # It has ended: nothing of that name runs to be cancelled.
        with self.assertRaises(NotFoundError) as caught:
            self.client.cancel_execution(handle.environment_id, "exec-1")
        self.assertIn("exec-1", caught.exception.message)
        with self.assertRaises(NotFoundError):
            self.client.cancel_execution("no-such-environment", "exec-1")

    # --- tools -----------------------------------------------------------

    def test_tools_are_listed_and_called_in_the_environments_tenant(self):
        names = {tool["name"] for tool in self.client.list_tools()}
        self.assertLessEqual({"sandbox_run_command", "workspace_read_text", "workspace_write_text"}, names)
        with self.client.environment(TENANT, unique_run()) as env:
            env.call_tool("workspace_write_text", {"path": "notes.md", "text": "hello"})
            read = self.client.call_tool("workspace_read_text", env.id, {"path": "notes.md"}, tenant_id=TENANT)
            self.assertIn("hello", str(read))
            with self.assertRaises(NotFoundError):
                self.client.call_tool("workspace_read_text", env.id, {"path": "notes.md"}, tenant_id="other")
            with self.assertRaises(ToolValidationError):
                env.call_tool("sandbox_run_command", {"command": "ls -la"})

    def test_connection_error(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        # Bound but never listening, then closed: nothing accepts there.
        client = AirlockClient(f"http://127.0.0.1:{port}", token="x" * 20, timeout=5)
        with self.assertRaises(AirlockConnectionError) as caught:
            client.health()
        self.assertIsInstance(caught.exception, AirlockError)
        self.assertIsNone(caught.exception.status)

    # --- leases ----------------------------------------------------------

    def test_renew_lease_moves_forward_only(self):
        run = unique_run()
        self.assertEqual(self.client.renew_lease(TENANT, run, 5), Lease(TENANT, run, 5))
        self.assertEqual(self.client.renew_lease(TENANT, run, 3), Lease(TENANT, run, 5))
        with self.assertRaises(ExecutionRejectedError) as caught:
            self.client.provision(TENANT, run, lease_epoch=4)
        self.assertIn("older", caught.exception.message)
        self.provision(run_id=run, lease_epoch=5)

    def test_a_lease_is_the_tenants_own(self):
        run = unique_run()
        self.assertEqual(self.client.renew_lease(TENANT, run, 7), Lease(TENANT, run, 7))
        with self.assertRaises(ExecutionRejectedError):
            self.client.provision(TENANT, run, lease_epoch=6)
        # Another tenant's run of the same id is another lease: epoch 0 is
        # current there (the reaper's side is tested in tests/service).
        other = self.provision(tenant_id=TENANT + "-other", run_id=run, lease_epoch=0)
        self.assertEqual((other.tenant_id, other.run_id), (TENANT + "-other", run))

    def test_a_stale_epoch_is_reaped(self):
        run = unique_run()
        handle = self.provision(run_id=run, lease_epoch=1)
        fresh = self.provision(run_id=run, lease_epoch=2)
        self.client.renew_lease(TENANT, run, 2)
        # The reaper runs every second; wait for its verdict (bounded).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.client.get(handle.environment_id)
            except NotFoundError:
                break
            time.sleep(0.05)
        else:
            self.fail("the reaper did not destroy the stale environment within 30 s")
        self.assertEqual(self.client.get(fresh.environment_id), fresh)

    # --- token sources ---------------------------------------------------

    def test_token_sources(self):
        token = self.serve.token()
        sources = {
            "argument": lambda: AirlockClient(self.serve.url, token=token),
            "token_file": lambda: AirlockClient(self.serve.url, token_file=self.serve.token_file),
            "AIRLOCK_SERVICE_TOKEN": lambda: AirlockClient(self.serve.url),
            "AIRLOCK_TOKEN_FILE": lambda: AirlockClient(self.serve.url),
        }
        environments = {
            "argument": {"AIRLOCK_SERVICE_TOKEN": "wrong-token-wrong-token"},
            "token_file": {},
            "AIRLOCK_SERVICE_TOKEN": {"AIRLOCK_SERVICE_TOKEN": token},
            "AIRLOCK_TOKEN_FILE": {"AIRLOCK_TOKEN_FILE": self.serve.token_file},
        }
        for name, make in sources.items():
            with self.subTest(source=name):
                with mock.patch.dict(os.environ, environments[name], clear=True):
                    client = make()
                self.assertIsInstance(client.list_environments(), list)
                self.assertNotIn(token, repr(client))
        with mock.patch.dict(os.environ, {"AIRLOCK_URL": self.serve.url, "AIRLOCK_SERVICE_TOKEN": token}, clear=True):
            self.assertIsInstance(AirlockClient().list_environments(), list)

    # --- context manager -------------------------------------------------

    def test_environment_context_manager_destroys_on_exit(self):
        with self.client.environment(TENANT, unique_run()) as env:
            self.assertIn(env.id, [h.environment_id for h in self.client.list_environments()])
            self.assertEqual(env.execute(["echo", "1"]).stdout, b"1\n")
            env.write_file("f.txt", "data")
            self.assertEqual(env.read_file("f.txt"), b"data")
            self.assertEqual([e.name for e in env.list_dir()], ["f.txt"])
            self.assertEqual(env.provenance("f.txt"), "TOOL_WRITTEN")
            self.assertEqual(env.refresh(), env.handle)
            env_id = env.id
        with self.assertRaises(NotFoundError):
            self.client.get(env_id)

    def test_environment_context_manager_destroys_when_the_block_raises(self):
        class Boom(Exception):
            pass

        with self.assertRaises(Boom):
            with self.client.environment(TENANT, unique_run()) as env:
                env_id = env.id
                raise Boom()
        with self.assertRaises(NotFoundError):
            self.client.get(env_id)


class ArtifactTest(unittest.TestCase):
    """The artifact routes; skipped, saying why, when the binary under test
    predates them (it answers "no such route")."""

    @classmethod
    def setUpClass(cls):
        binary = require_binary()
        cls.serve = ServeProcess(binary, sandbox="fake")
        cls.client = cls.serve.client()
        try:
            cls.client.get_artifact("01a22b00-0000-7000-8000-000000000000", TENANT)
        except NotFoundError as e:
            if "no such route" in e.message:
                cls.serve.stop()
                raise unittest.SkipTest(f"{binary} has no artifact routes yet ({e.message})")
        except ExecutionUnavailableError as e:
            cls.serve.stop()
            raise unittest.SkipTest(f"{binary} serves no artifact store: {e.message}")

    @classmethod
    def tearDownClass(cls):
        status = cls.serve.stop()
        if status != 0:
            raise AssertionError(f"airlock serve exited with {status}:\n{cls.serve.log()}")

    def test_export_download_get_delete(self):
        data = b"result table\n" * 100
        run = unique_run()
        with self.client.environment(TENANT, run) as env:
            env.write_file("out/report.csv", data)
            meta = env.export_artifact("out/report.csv", media_type="text/csv")
        self.assertIsInstance(meta, ArtifactMetadata)
        self.assertEqual((meta.tenant_id, meta.run_id), (TENANT, run))
        self.assertEqual((meta.origin, meta.trust), ("SANDBOX_EXPORT", "EXTERNAL_UNTRUSTED"))
        self.assertEqual(meta.filename, "report.csv")
        self.assertEqual(meta.media_type, "text/csv")
        self.assertEqual(meta.size_bytes, len(data))
        self.assertEqual(meta.sha256, hashlib.sha256(data).hexdigest())
        # The artifact outlives the environment it came from.
        self.assertEqual(self.client.download_artifact(meta.artifact_id, TENANT), data)
        self.assertEqual(self.client.get_artifact(meta.artifact_id, TENANT), meta)
        with self.assertRaises(NotFoundError):
            self.client.get_artifact(meta.artifact_id, "another-tenant")
        with self.assertRaises(NotFoundError):
            self.client.download_artifact(meta.artifact_id, "another-tenant")
        self.client.delete_artifact(meta.artifact_id, TENANT)
        with self.assertRaises(NotFoundError):
            self.client.get_artifact(meta.artifact_id, TENANT)

    def test_upload(self):
        meta = self.client.upload_artifact(TENANT, b"\x00\xffinput", filename="in put.bin", media_type="application/x-demo")
        self.addCleanup(self.client.delete_artifact, meta.artifact_id, TENANT)
        self.assertEqual((meta.origin, meta.run_id, meta.filename), ("UPLOAD", None, "in put.bin"))
        self.assertEqual(self.client.download_artifact(meta.artifact_id, TENANT), b"\x00\xffinput")

    def test_a_runs_artifacts_are_listed_newest_first_after_its_environment_is_gone(self):
        run = unique_run()
        with self.client.environment(TENANT, run) as env:
            env.write_file("a.txt", b"first")
            env.write_file("b.txt", b"second!")
            first = env.export_artifact("a.txt")
            second = env.export_artifact("b.txt", media_type="text/plain")
        listed = self.client.list_run_artifacts(TENANT, run)
        # Newest first; two made in one millisecond are in either order.
        if first.created_at < second.created_at:
            self.assertEqual(listed, [second, first])
        else:
            self.assertCountEqual(listed, [second, first])
        made = {m.artifact_id: m for m in listed}[second.artifact_id]
        self.assertEqual((made.filename, made.media_type, made.size_bytes), ("b.txt", "text/plain", 7))
        self.assertEqual(made.sha256, hashlib.sha256(b"second!").hexdigest())
        self.assertEqual(self.client.list_run_artifacts(TENANT, run, limit=1), listed[:1])
        self.assertEqual(self.client.list_run_artifacts("another-tenant", run), [])
        with self.assertRaises(ToolValidationError) as caught:
            self.client.list_run_artifacts(TENANT, run, limit=0)
        self.assertIn("limit", caught.exception.message)

    def test_export_refuses_an_escaping_path(self):
        with self.client.environment(TENANT, unique_run()) as env:
            with self.assertRaises(WorkspaceEscapeError):
                env.export_artifact("../etc/passwd")
            with self.assertRaises(NotFoundError):
                env.export_artifact("missing.txt")


class _StubHandler(http.server.BaseHTTPRequestHandler):
    """Serves artifact content whose X-Airlock-Sha256 does not match."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        body = b"tampered"
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("X-Airlock-Sha256", hashlib.sha256(b"original").hexdigest())
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class DownloadIntegrityTest(unittest.TestCase):
    def test_a_download_that_does_not_match_its_sha256_is_refused(self):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _StubHandler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(thread.join)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        client = AirlockClient(f"http://127.0.0.1:{server.server_address[1]}", token="x" * 20)
        with self.assertRaises(ArtifactIntegrityError) as caught:
            client.download_artifact("01a22b00-0000-7000-8000-000000000000", TENANT)
        self.assertEqual(caught.exception.code, "artifact_integrity_error")


if __name__ == "__main__":
    unittest.main()
