"""docs/openapi.yaml against the code: every reference resolves,
authentication and errors are declared, and the result schemas name
exactly the fields src/airlock/core/json.cpp writes. (That its paths,
methods and query parameters are the route table's is checked by
tests/service/routes_test.cpp, against the table itself.) YAML through
Debian's python3-yaml, see scripts/bootstrap."""

import re
import unittest

import yaml

from .support import REPO_ROOT
from .test_errors import service_error_codes

HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def json_cpp_keys(type_name: str) -> set[str]:
    """The JSON member names to_json(json&, const <type_name>&) writes."""
    text = (REPO_ROOT / "src/airlock/core/json.cpp").read_text()
    start = text.index(f"void to_json(json& j, const {type_name}& v)")
    body = text[start : text.index("\n}\n", start)]
    return set(re.findall(r'\{"([a-z_0-9]+)",', body))


class OpenApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(REPO_ROOT / "docs/openapi.yaml", encoding="utf-8") as f:
            cls.doc = yaml.safe_load(f)

    def operations(self):
        for path, item in self.doc["paths"].items():
            for method, op in item.items():
                if method in HTTP_METHODS:
                    yield path, method, op, item

    def resolve(self, node):
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            self.assertTrue(ref.startswith("#/"), ref)
            target = self.doc
            for part in ref[2:].split("/"):
                self.assertIn(part, target, f"unresolved $ref {ref}")
                target = target[part]
            node = target
        return node

    def test_it_is_openapi_3_0(self):
        self.assertRegex(str(self.doc["openapi"]), r"^3\.0\.\d+$")
        self.assertIn("title", self.doc["info"])
        self.assertIn("version", self.doc["info"])

    def test_every_ref_resolves(self):
        def walk(node, where):
            if isinstance(node, dict):
                if "$ref" in node:
                    with self.subTest(ref=node["$ref"], at=where):
                        self.resolve(node)
                for k, v in node.items():
                    walk(v, f"{where}/{k}")
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    walk(v, f"{where}[{i}]")

        walk(self.doc, "#")

    def test_path_parameters_are_declared(self):
        for path, method, op, item in self.operations():
            params = [self.resolve(p) for p in item.get("parameters", []) + op.get("parameters", [])]
            declared = {p["name"] for p in params if p["in"] == "path"}
            with self.subTest(path=path, method=method):
                self.assertEqual(declared, set(re.findall(r"\{([^}]+)\}", path)))
                for p in params:
                    if p["in"] == "path":
                        self.assertTrue(p.get("required"), p["name"])

    def test_bearer_authentication_everywhere_but_healthz(self):
        scheme = self.doc["components"]["securitySchemes"]["bearerAuth"]
        self.assertEqual((scheme["type"], scheme["scheme"]), ("http", "bearer"))
        internal = self.doc["components"]["securitySchemes"]["internalCredential"]
        self.assertEqual((internal["type"], internal["scheme"]), ("http", "bearer"))
        self.assertEqual(self.doc["security"], [{"bearerAuth": []}])
        for path, method, op, _ in self.operations():
            with self.subTest(path=path, method=method):
                if path == "/healthz":
                    self.assertEqual(op.get("security"), [])
                elif path.startswith("/internal/"):
                    # The internal API: the internal service credential alone.
                    self.assertEqual(op.get("security"), [{"internalCredential": []}])
                    self.assertIn("401", op["responses"])
                else:
                    self.assertNotIn("security", op)  # the global bearer requirement applies
                    self.assertIn("401", op["responses"])

    def test_responses_are_declared_and_errors_use_the_error_schema(self):
        error_schema = self.doc["components"]["schemas"]["Error"]
        for path, method, op, _ in self.operations():
            statuses = [str(s) for s in op["responses"]]
            with self.subTest(path=path, method=method):
                self.assertTrue(any(s.startswith("2") for s in statuses), statuses)
                for status in statuses:
                    response = self.resolve(op["responses"][status])
                    self.assertIn("description", response)
                    if status.startswith(("4", "5")):
                        schema = self.resolve(response["content"]["application/json"]["schema"])
                        self.assertIs(schema, error_schema)

    def test_error_codes_are_the_service_codes(self):
        enum = set(self.doc["components"]["schemas"]["ErrorCode"]["enum"])
        self.assertEqual(enum, service_error_codes())
        description = self.doc["info"]["description"]
        for code in enum:
            self.assertIn(f"`{code}`", description, f"{code} missing from the error table")

    def test_result_schemas_match_the_json_the_service_writes(self):
        schemas = self.doc["components"]["schemas"]
        for schema_name, type_name in [
            ("ExecutionResult", "ExecutionResult"),
            ("FileChange", "FileChange"),
            ("EnvironmentHandle", "EnvironmentHandle"),
        ]:
            with self.subTest(schema=schema_name):
                keys = json_cpp_keys(type_name)
                self.assertGreaterEqual(len(keys), 4, f"to_json for {type_name} not found")
                self.assertEqual(set(schemas[schema_name]["properties"]), keys)
                self.assertEqual(set(schemas[schema_name]["required"]), keys)
        kill = json_cpp_keys("ExecutionResult")  # sanity of the parse itself
        self.assertIn("files_changed_truncated", kill)


if __name__ == "__main__":
    unittest.main()
