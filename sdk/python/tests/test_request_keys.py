"""The client sends only keys the service takes: the service refuses an
unknown top-level key of a JSON body with 400 bad_request (request_keys.h),
so every body the client builds, with every optional argument given, must
name only properties of its route's request schema in docs/openapi.yaml;
and the routes that refuse unknown keys say so there
(additionalProperties: false). No server: the request is captured before
it is sent."""

import re
import unittest
from unittest import mock

import yaml

from airlock_client import AirlockClient
from airlock_client.models import ResourceLimits

from .support import REPO_ROOT


class _Sent(Exception):
    pass


# (METHOD, path template) of the routes whose schema refuses unknown keys.
STRICT_ROUTES = {
    ("POST", "/v1/environments"),
    ("POST", "/v1/environments/{environment_id}/execute"),
    ("POST", "/v1/environments/{environment_id}/artifacts"),
    ("PUT", "/v1/runs/{run_id}/lease"),
    ("POST", "/v1/environments/{environment_id}/files/rename"),
    ("POST", "/v1/environments/{environment_id}/directories"),
    ("POST", "/v1/tools/{name}"),
}


class RequestKeysTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(REPO_ROOT / "docs/openapi.yaml", encoding="utf-8") as f:
            cls.doc = yaml.safe_load(f)

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            target = self.doc
            for part in node["$ref"][2:].split("/"):
                target = target[part]
            node = target
        return node

    def request_schema(self, method: str, path: str):
        """The JSON request schema of the route `path` matches, and its template."""
        for template, item in self.doc["paths"].items():
            pattern = "^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$"
            op = item.get(method.lower())
            if op is not None and re.match(pattern, path):
                body = op.get("requestBody", {}).get("content", {}).get("application/json")
                return template, (self.resolve(body["schema"]) if body else None)
        self.fail(f"no route in docs/openapi.yaml for {method} {path}")

    def sent_body(self, call):
        """(method, path, json_body) of the request `call` makes."""
        client = AirlockClient("http://127.0.0.1:1", token="t" * 20)
        seen = []

        def capture(method, path, **kwargs):
            seen.append((method, path, kwargs.get("json_body")))
            raise _Sent()

        with mock.patch.object(client, "_request", side_effect=capture):
            with self.assertRaises(_Sent):
                call(client)
        self.assertEqual(len(seen), 1)
        return seen[0]

    def test_every_json_body_names_only_properties_of_its_route(self):
        limits = ResourceLimits(
            cpu_millicores=500, memory_bytes=1 << 28, pids_max=64, workspace_bytes=1 << 28,
            inodes_max=1000, wall_clock_seconds=30,
        )
        calls = {
            "provision": lambda c: c.provision("t", "r", 1, limits, {"A": "b"}, network=True),
            "execute": lambda c: c.execute("e", ["true"], working_directory="d", timeout_seconds=5,
                                           maximum_output_bytes=10, stdin=b"x", execution_id="x-1",
                                           env={"A": "b"}),
            "call_tool": lambda c: c.call_tool("workspace_list", "e", {"path": "."}, tenant_id="t"),
            "export_artifact": lambda c: c.export_artifact("e", "p", filename="f", media_type="text/plain"),
            "renew_lease": lambda c: c.renew_lease("t", "r", 2),
            "rename_path": lambda c: c.rename_path("e", "a", b"b-\xff", replace=True),
            "make_dir": lambda c: c.make_dir("e", "d"),
        }
        if hasattr(AirlockClient, "run_code"):
            calls["run_code"] = lambda c: c.run_code("e", "def main(): pass", capabilities=["fs.*"],
                                                     working_directory="d", timeout_seconds=5,
                                                     maximum_output_bytes=10)
        if hasattr(AirlockClient, "acknowledge_fires"):
            calls["acknowledge_fires"] = lambda c: c.acknowledge_fires(3)
        strict_seen = set()
        for name, call in calls.items():
            with self.subTest(method=name):
                method, path, body = self.sent_body(call)
                self.assertIsInstance(body, dict)
                template, schema = self.request_schema(method, path)
                self.assertIsNotNone(schema, f"{method} {template} has no JSON request schema")
                self.assertEqual(set(body) - set(schema["properties"]), set())
                if (method, template) in STRICT_ROUTES:
                    strict_seen.add((method, template))
                if name == "provision":
                    self.assertEqual(set(body["limits"]) - set(self.resolve(schema["properties"]["limits"])
                                                               ["properties"]), set())
        self.assertEqual(strict_seen, STRICT_ROUTES)  # every strict route has a method

    def test_the_routes_that_refuse_unknown_keys_document_it(self):
        for method, template in sorted(STRICT_ROUTES):
            with self.subTest(route=f"{method} {template}"):
                op = self.doc["paths"][template][method.lower()]
                schema = self.resolve(op["requestBody"]["content"]["application/json"]["schema"])
                self.assertIs(schema.get("additionalProperties"), False)


if __name__ == "__main__":
    unittest.main()
