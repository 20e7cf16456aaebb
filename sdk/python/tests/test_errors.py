"""Error mapping without a server: every stable code the service can send
has its exception class, and odd responses still become AirlockError."""

import json
import re
import unittest

import airlock_client
from airlock_client import errors
from airlock_client.models import ExecutionResult, decode_bytes, decode_name, encode_bytes

from .support import REPO_ROOT


def service_error_codes() -> set[str]:
    """The codes the service sends: errorCodeName() in core/error.cpp plus
    the transport codes named in gateway/api/api.h's comment and "internal"."""
    error_cpp = (REPO_ROOT / "src/airlock/core/error.cpp").read_text()
    body = error_cpp[error_cpp.index("errorCodeName") :]
    body = body[: body.index("unknown_error")]
    codes = set(re.findall(r'return "([a-z_]+)";', body))
    api_h = (REPO_ROOT / "src/airlock/gateway/api/api.h").read_text()
    header = api_h[: api_h.index("#pragma once")]
    codes |= set(re.findall(r'"([a-z]+(?:_[a-z]+)*)"', header[header.index("stable") :].split("\n//   ")[0]))
    codes.add("internal")  # Api::handle on an unexpected exception
    return codes


class ErrorMappingTest(unittest.TestCase):
    def test_every_service_code_has_its_class(self):
        codes = service_error_codes()
        # The parse found the taxonomy, not nothing.
        self.assertTrue({"not_found", "workspace_escape", "execution_unavailable", "unauthorized"} <= codes, codes)
        for code in codes:
            with self.subTest(code=code):
                self.assertIn(code, errors.ERROR_CLASSES)
                cls = errors.ERROR_CLASSES[code]
                self.assertIs(getattr(airlock_client, cls.__name__), cls)

    def test_a_json_error_body_picks_the_class(self):
        cases = {
            "unauthorized": (401, airlock_client.UnauthorizedError),
            "not_found": (404, airlock_client.NotFoundError),
            "tool_validation_error": (400, airlock_client.ToolValidationError),
            "workspace_escape": (400, airlock_client.WorkspaceEscapeError),
            "execution_rejected": (409, airlock_client.ExecutionRejectedError),
            "execution_unavailable": (503, airlock_client.ExecutionUnavailableError),
            "sandbox_escape_suspected": (409, airlock_client.SandboxEscapeSuspectedError),
            "artifact_integrity_error": (422, airlock_client.ArtifactIntegrityError),
            "configuration_error": (500, airlock_client.ConfigurationError),
            "method_not_allowed": (405, airlock_client.MethodNotAllowedError),
            "bad_request": (400, airlock_client.BadRequestError),
            "payload_too_large": (413, airlock_client.PayloadTooLargeError),
            "internal": (500, airlock_client.InternalError),
        }
        for code, (status, cls) in cases.items():
            with self.subTest(code=code):
                body = json.dumps({"error": {"code": code, "message": f"what {code} means"}}).encode()
                e = errors.error_from_response(status, body)
                self.assertIs(type(e), cls)
                self.assertIsInstance(e, airlock_client.AirlockError)
                self.assertEqual((e.code, e.message, e.status), (code, f"what {code} means", status))
                self.assertIn(code, str(e))

    def test_an_unknown_code_is_the_base_class_with_that_code(self):
        e = errors.error_from_response(418, b'{"error": {"code": "brand_new", "message": "m"}}')
        self.assertIs(type(e), airlock_client.AirlockError)
        self.assertEqual((e.code, e.message, e.status), ("brand_new", "m", 418))

    def test_a_body_that_is_not_json_falls_back_to_the_status(self):
        e = errors.error_from_response(503, b"<html>gateway down</html>")
        self.assertIsInstance(e, airlock_client.ExecutionUnavailableError)
        self.assertIn("gateway down", e.message)
        for body in [b"", b"\xff\xfe", b"[1, 2]", b'{"error": "flat"}', b'{"error": {"code": 7}}']:
            with self.subTest(body=body):
                e = errors.error_from_response(404, body)
                self.assertIsInstance(e, airlock_client.NotFoundError)
                self.assertTrue(e.message)


class BytesCodingTest(unittest.TestCase):
    def test_bytes_values(self):
        self.assertEqual(decode_bytes("h\u00e9"), "h\u00e9".encode())
        self.assertEqual(decode_bytes({"base64": "/wA="}), b"\xff\x00")
        self.assertEqual(decode_bytes(None), b"")
        with self.assertRaises(ValueError):
            decode_bytes(42)
        self.assertEqual(encode_bytes(b"plain"), "plain")
        self.assertEqual(encode_bytes(b"\xff\x00"), {"base64": "/wA="})
        self.assertEqual(decode_bytes(encode_bytes(bytes(range(256)))), bytes(range(256)))
        self.assertEqual(decode_name({"base64": "/w=="}), "\udcff")

    def test_result_from_json_with_a_kill_and_base64(self):
        r = ExecutionResult.from_json(
            {
                "exit_code": None,
                "stdout": {"base64": "/w=="},
                "stderr": "",
                "stdout_truncated": True,
                "stderr_truncated": False,
                "timed_out": False,
                "killed_by": "OUTPUT_LIMIT",
                "files_changed": [
                    {"path": {"base64": "/w=="}, "change": "DELETED", "size_bytes": 0, "sha256": None},
                    {"path": "a.txt", "change": "CREATED", "size_bytes": 3, "sha256": "ab" * 32},
                ],
                "files_changed_truncated": False,
                "duration_ms": 12,
                "peak_memory_bytes": 1024,
                "cpu_time_ms": None,
                "a_future_field": 1,
            }
        )
        self.assertEqual(r.stdout, b"\xff")
        self.assertFalse(r.ok)
        self.assertEqual(r.killed_by, "OUTPUT_LIMIT")
        self.assertEqual(r.files_changed[0].path, "\udcff")
        self.assertIsNone(r.files_changed[0].sha256)
        self.assertEqual(r.files_changed[1].sha256, "ab" * 32)
        self.assertEqual(r.peak_memory_bytes, 1024)


if __name__ == "__main__":
    unittest.main()
