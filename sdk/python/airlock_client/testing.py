"""A local `airlock serve` as a child process, for tests, benchmarks and
trying the client out.

    with ServeProcess("/path/to/airlock", sandbox="fake") as serve:
        client = serve.client()
        ...

The child gets a fresh temporary state directory, listens on 127.0.0.1
port 0 (its port is read from the JSON "listening" line it logs on stderr)
and runs in dev auth mode: its token is read from
<state_dir>/service-token. Nothing of the caller's environment reaches it
except PATH and the variables passed in ``env``. Everything it logs is kept
in ``log_lines``. stop() sends SIGTERM, waits for the exit and removes the
state directory.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Mapping, Optional

from .client import AirlockClient

DEFAULT_BINARY = "/tmp/airlock-bin/airlock"


def default_binary() -> str:
    return os.environ.get("AIRLOCK_BINARY") or DEFAULT_BINARY


class ServeError(RuntimeError):
    pass


class ServeProcess:
    def __init__(
        self,
        binary: Optional[str] = None,
        sandbox: str = "fake",
        env: Optional[Mapping[str, str]] = None,
        startup_timeout: float = 60.0,
        state_dir: Optional[str] = None,
    ):
        self.binary = binary or default_binary()
        self._own_state_dir = state_dir is None
        self.state_dir = state_dir or tempfile.mkdtemp(prefix="airlock-serve-")
        child_env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "AIRLOCK_SANDBOX": sandbox,
            "AIRLOCK_STATE_DIR": self.state_dir,
            "AIRLOCK_LISTEN": "127.0.0.1:0",
        }
        child_env.update(env or {})
        self.log_lines: list[str] = []
        self._lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self.port = 0
        self.returncode: Optional[int] = None
        self.proc = subprocess.Popen(
            [self.binary, "serve"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=child_env,
        )
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        try:
            self._wait_listening(startup_timeout)
        except BaseException:
            self.stop()
            raise

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.log_lines.append(line)
            self._lines.put(line)
        self._lines.put(None)  # EOF

    def _wait_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServeError("airlock serve did not log a listening line in time:\n" + self.log())
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait()
                raise ServeError(f"airlock serve exited with {self.proc.returncode} before listening:\n" + self.log())
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("event") == "listening":
                self.port = int(event["port"])
                return

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token_file(self) -> str:
        return os.path.join(self.state_dir, "service-token")

    def token(self) -> str:
        with open(self.token_file, encoding="utf-8") as f:
            return f.read().strip()

    def client(self, **kwargs) -> AirlockClient:
        kwargs.setdefault("token_file", self.token_file)
        return AirlockClient(self.url, **kwargs)

    def log(self) -> str:
        return "\n".join(self.log_lines)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, wait (SIGKILL after ``timeout``); returns the exit status."""
        if self.returncode is None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            self.returncode = self.proc.returncode
            self._reader.join(timeout=timeout)
            if self.proc.stderr is not None:
                self.proc.stderr.close()
            if self._own_state_dir:
                shutil.rmtree(self.state_dir, ignore_errors=True)
        return self.returncode

    def __enter__(self) -> "ServeProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
