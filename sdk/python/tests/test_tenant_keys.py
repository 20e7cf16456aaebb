"""Tenant API keys through the Python client, against a running `airlock
serve` (fake mechanism) whose key file `airlock tenant-key create --append`
wrote: a key is passed exactly as the service token is (``token=``), acts for
its own tenant, sees nothing of another's, and may not call operator routes."""

import os
import subprocess
import tempfile
import unittest
import uuid

from airlock_client import AirlockClient, ForbiddenError, NotFoundError, UnauthorizedError
from airlock_client.testing import ServeProcess

from .support import require_binary


def mint(binary: str, tenant: str, key_file: str) -> str:
    """A new key of ``tenant``, its line appended to ``key_file``."""
    out = subprocess.run(
        [binary, "tenant-key", "create", tenant, "--append", key_file],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    fields = dict(line.split(": ", 1) for line in out.splitlines())
    assert fields["tenant_id"] == tenant, out
    return fields["key"]


class TenantKeyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        binary = require_binary()
        cls.dir = tempfile.TemporaryDirectory(prefix="airlock-tenant-keys-")
        cls.key_file = os.path.join(cls.dir.name, "tenant-keys")
        cls.key_a = mint(binary, "tenant-a", cls.key_file)
        cls.key_b = mint(binary, "tenant-b", cls.key_file)
        cls.serve = ServeProcess(binary, sandbox="fake", env={"AIRLOCK_TENANT_KEYS_FILE": cls.key_file})
        cls.operator = cls.serve.client()

    @classmethod
    def tearDownClass(cls):
        try:
            leftover = cls.operator.list_environments()
        finally:
            status = cls.serve.stop()
            cls.dir.cleanup()
        if leftover:
            raise AssertionError(f"tests left environments behind: {leftover}")
        if status != 0:
            raise AssertionError(f"airlock serve exited with {status}:\n{cls.serve.log()}")

    def test_the_key_file_holds_digests_only_and_is_the_owners(self):
        with open(self.key_file, encoding="utf-8") as f:
            text = f.read()
        self.assertNotIn(self.key_a, text)
        self.assertNotIn(self.key_b, text)
        self.assertEqual(len(text.splitlines()), 2, text)
        self.assertEqual(os.stat(self.key_file).st_mode & 0o777, 0o600)
        self.assertNotIn(self.key_a, "\n".join(self.serve.log_lines))

    def test_a_key_acts_for_its_own_tenant_only(self):
        a = AirlockClient(self.serve.url, token=self.key_a)
        b = AirlockClient(self.serve.url, token=self.key_b)
        self.assertNotIn(self.key_a, repr(a))
        handle = a.provision("tenant-a", "run-" + uuid.uuid4().hex[:12])
        self.addCleanup(self.operator.destroy, handle.environment_id)
        self.assertEqual(handle.tenant_id, "tenant-a")
        self.assertEqual(a.get(handle.environment_id), handle)
        self.assertEqual([e.environment_id for e in a.list_environments()], [handle.environment_id])
        self.assertEqual(b.list_environments(), [])
        with self.assertRaises(NotFoundError) as unknown:
            b.get(handle.environment_id)
        self.assertEqual(unknown.exception.status, 404)
        with self.assertRaises(ForbiddenError) as foreign:
            b.provision("tenant-a", "run-x")
        self.assertEqual((foreign.exception.code, foreign.exception.status), ("forbidden", 403))
        with self.assertRaises(ForbiddenError):
            a.metrics_text()
        self.assertIn("airlock_", self.operator.metrics_text())
        with self.assertRaises(UnauthorizedError):
            AirlockClient(self.serve.url, token=self.key_a[:-1] + "0").list_environments()


if __name__ == "__main__":
    unittest.main()
