"""Runs in netlab's service namespace against `airlock serve` there.

Usage: serve_probe.py BASE TOKEN_FILE PROBE...
Provisions with "network": true, runs sandbox_client.py with the probes,
then checks that "network": false gives nothing and prints one JSON object:
{"with_network": <client report>, "without_network": <client report>,
 "metrics": <text of /metrics>}.
"""
import json
import os
import sys

from airlock_client import AirlockClient

HERE = os.path.dirname(os.path.abspath(__file__))


def run_client(env, probes):
    with open(os.path.join(HERE, "sandbox_client.py")) as f:
        env.write_file("sandbox_client.py", f.read())
    result = env.execute(["/usr/bin/python3", "sandbox_client.py", *probes], timeout_seconds=60)
    if result.exit_code != 0:
        raise SystemExit(f"client failed: {result.exit_code} {result.stderr_text}")
    return json.loads(result.stdout_text)


def main(base, token_file, probes):
    client = AirlockClient(base, token_file=token_file)
    out = {}
    with client.environment("lab-tenant", "lab-run", network=True) as env:
        out["with_network"] = run_client(env, probes)
    with client.environment("lab-tenant", "lab-run-2") as env:
        out["without_network"] = run_client(env, probes)
    out["metrics"] = client.metrics_text()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
