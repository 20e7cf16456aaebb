"""A two-namespace network lab in which no packet can leave the machine.

  service namespace (unshare -n -m)        world namespace (unshare -n)
  airlock runs here, with its proxy  <-->  every "public" address is a sink
  10.77.0.1/30 on al-svc                   10.77.0.2/30 on al-world; the sinks'
  default route via 10.77.0.2              addresses on its loopback

The world namespace has no route anywhere else, so even a broken sandbox or
proxy reaches only the test's sinks, which count what arrives. The service
namespace has its own mount namespace, where /etc/hosts is the lab's (names
resolve from the file; /etc/resolv.conf is empty, so a query would go to
127.0.0.1 inside the lab and find nobody).

Everything started here is stopped by pid in close(); the namespaces, the veth
pair and the bind mounts end with their last process.
"""
import json
import os
import subprocess
import tempfile

PYTHON = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))

# name -> address in the world. Names resolve from the lab's /etc/hosts.
HOSTS = {
    "www.lab.example": "93.184.216.34",       # the allowed destination
    "other.example": "93.184.216.35",         # a second public host, not listed
    "internal.lab.example": "10.0.0.5",       # a listed-looking name with a private address
    "meta.lab.example": "169.254.169.254",    # a listed-looking name with the metadata address
}
# The address the lab checks itself with, from the service namespace directly
# (proof that a sandbox that could route would reach a sink).
CONTROL = "93.184.216.36"
WORLD_ADDRESSES = ["93.184.216.34", "93.184.216.35", CONTROL, "169.254.169.254", "10.0.0.5",
                   "8.8.8.8"]
SINKS = ["93.184.216.34:80", "93.184.216.34:8080", "93.184.216.35:80", CONTROL + ":80",
         "169.254.169.254:80", "10.0.0.5:80", "8.8.8.8:53"]


def run(*argv, **kwargs):
    return subprocess.run(list(argv), check=True, capture_output=True, text=True, **kwargs)


class NetLab:
    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="airlock-netlab-")
        self.world = None
        self.service = None
        self.hits = None

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def _start(self):
        with open(self.path("hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n")
            for name, address in HOSTS.items():
                # glibc's files backend compares names literally; the proxy
                # asks for the fully qualified form with its trailing dot.
                f.write(f"{address} {name} {name}.\n")
        open(self.path("resolv.conf"), "w").close()

        self.world = subprocess.Popen(
            ["unshare", "-n", PYTHON, "-B", os.path.join(HERE, "world.py"), *SINKS],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.service = subprocess.Popen(
            ["unshare", "-n", "-m", "--propagation", "private", PYTHON, "-c",
             "import sys; print('started', flush=True); sys.stdin.read()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        # Each prints "started" once it runs inside its new namespaces.
        for proc in (self.world, self.service):
            line = proc.stdout.readline().strip()
            if line != "started":
                raise RuntimeError(f"lab process {proc.pid} did not start: {line!r}")

        w, s = str(self.world.pid), str(self.service.pid)
        run("ip", "link", "add", "al-svc", "netns", s, "type", "veth", "peer", "name", "al-world",
            "netns", w)
        self.in_service("ip", "link", "set", "lo", "up")
        self.in_service("ip", "addr", "add", "10.77.0.1/30", "dev", "al-svc")
        self.in_service("ip", "link", "set", "al-svc", "up")
        self.in_service("ip", "route", "add", "default", "via", "10.77.0.2")
        self.in_world("ip", "link", "set", "lo", "up")
        self.in_world("ip", "addr", "add", "10.77.0.2/30", "dev", "al-world")
        self.in_world("ip", "link", "set", "al-world", "up")
        for address in WORLD_ADDRESSES:
            self.in_world("ip", "addr", "add", address + "/32", "dev", "lo")
        # The world answers the service namespace only (it has no other route).
        run("nsenter", "-t", s, "-m", "mount", "--bind", self.path("hosts"), "/etc/hosts")
        run("nsenter", "-t", s, "-m", "mount", "--bind", self.path("resolv.conf"),
            "/etc/resolv.conf")

        self.world.stdin.write("go\n")
        self.world.stdin.flush()
        line = self.world.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"world sinks did not start: {line!r}")

    def in_service(self, *argv, **kwargs):
        return run("nsenter", "-t", str(self.service.pid), "-n", "-m", *argv, **kwargs)

    def in_world(self, *argv):
        return run("nsenter", "-t", str(self.world.pid), "-n", *argv)

    def service_command(self, *argv):
        """argv run inside the service namespaces (network and mount)."""
        return ["nsenter", "-t", str(self.service.pid), "-n", "-m", "--", *argv]

    def stop_world(self):
        """Ends the sinks and returns what they received (once)."""
        if self.hits is None and self.world is not None:
            out, _ = self.world.communicate(timeout=30)
            lines = [l for l in out.splitlines() if l.strip()]
            self.hits = json.loads(lines[-1]) if lines else {}
        return self.hits

    def close(self):
        for proc in (self.world, self.service):
            if proc is None or proc.poll() is not None:
                continue
            try:
                proc.stdin.close()
                proc.wait(timeout=10)
            except Exception:
                proc.kill()  # we started it; by pid
                proc.wait()
        self.tmp.cleanup()
