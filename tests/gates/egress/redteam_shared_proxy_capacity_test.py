"""Red-team: one sandbox takes the whole egress proxy of `airlock serve`.

`airlock serve` runs one EgressProxy for every sandbox, with one
`max_connections` (512) for all of them, counted before the request head is
read, and each connection may sit there for `head_timeout` (10 s) without
sending a byte. A sandbox with egress opens 520 idle connections to
127.0.0.1:3128 (its init hands each one to the shared proxy); while it holds
them, every other tenant's sandbox is answered `503 over_capacity` before its
request is even read. Expected: a per-sandbox cap, so sandbox B's request is
decided on its own merits (here `403 host_not_allowed`).

No packet leaves loopback: B asks for a name the policy does not list (refused
before any lookup), and A never sends a request head. The service runs in the
host's network namespace, listening on 127.0.0.1 only.

Run: sudo AIRLOCK_BINARY=build/release/airlock python3 -m unittest \
     tests/gates/egress/redteam_shared_proxy_capacity_test.py
"""
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

AIRLOCK = os.environ.get("AIRLOCK_BINARY", "airlock")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "sdk", "python"))

POLICY = """\
egress:
  mode: allowlist
  destinations:
    - host: "*.lab.example"
      ports: [80]
"""

HOG = r"""
import socket, sys, time
socks = []
for _ in range(520):
    socks.append(socket.create_connection(("127.0.0.1", 3128), timeout=5))
print("holding", len(socks), flush=True)
time.sleep(8)
"""

VICTIM = r"""
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall(b"CONNECT other.example:80 HTTP/1.1\r\n\r\n")
print(s.recv(200).decode("latin-1").split("\r\n")[0])
"""


class RedteamSharedProxyCapacity(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            raise unittest.SkipTest("the linux mechanism needs root")
        self.work = tempfile.mkdtemp(prefix="airlock-rt-proxycap-")
        os.chmod(self.work, 0o755)  # the sandbox user traverses the state directory
        policy = os.path.join(self.work, "policy.yaml")
        with open(policy, "w") as f:
            f.write(POLICY)
        config = os.path.join(self.work, "serve.yaml")
        with open(config, "w") as f:
            f.write(f"sandbox: linux\nstate_dir: {self.work}/state\n"
                    f"listen: 127.0.0.1:0\negress_policy: {policy}\n")
        self.log_path = os.path.join(self.work, "serve.log")
        log = open(self.log_path, "w")
        self.serve = subprocess.Popen([AIRLOCK, "serve", "--config", config],
                                      stdout=subprocess.DEVNULL, stderr=log)
        log.close()
        self.base = None
        deadline = time.monotonic() + 60
        with open(self.log_path) as f:
            while time.monotonic() < deadline and self.serve.poll() is None:
                line = f.readline()
                if not line:
                    select.select([], [], [], 0.05)
                    continue
                event = json.loads(line) if line.startswith("{") else {}
                if event.get("event") == "listening":
                    self.base = f"http://127.0.0.1:{event['port']}"
                    break
        if self.base is None:
            self.tearDown()
            self.fail("airlock serve did not start: " + open(self.log_path).read())

    def tearDown(self):
        if self.serve.poll() is None:
            self.serve.send_signal(signal.SIGTERM)  # ours, by pid
            try:
                self.serve.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.serve.kill()
                self.serve.wait()
        shutil.rmtree(self.work, ignore_errors=True)

    def test_one_sandbox_cannot_starve_another_sandboxes_egress(self):
        from airlock_client import AirlockClient
        client = AirlockClient(self.base, token_file=f"{self.work}/state/service-token")
        with client.environment("tenant-a", "run-a", network=True) as hog, \
                client.environment("tenant-b", "run-b", network=True) as victim:
            hog.write_file("hog.py", HOG)
            victim.write_file("victim.py", VICTIM)
            hog_result = {}
            t = threading.Thread(target=lambda: hog_result.setdefault(
                "r", hog.execute(["/usr/bin/python3", "hog.py"], timeout_seconds=60)))
            t.start()
            time.sleep(3)  # the hog holds its connections now
            answer = victim.execute(["/usr/bin/python3", "victim.py"], timeout_seconds=30)
            t.join()
        self.assertIn("holding 520", hog_result["r"].stdout_text, hog_result["r"].stderr_text)
        first_line = answer.stdout_text.strip()
        self.assertNotIn("503", first_line,
                         "tenant-b's request was refused over_capacity because tenant-a "
                         "holds the shared proxy's connections")
        self.assertIn("403", first_line, answer.stderr_text)


if __name__ == "__main__":
    unittest.main()
