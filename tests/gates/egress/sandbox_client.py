"""Runs inside the sandbox: tries each way out and prints one JSON report.

Usage: python3 sandbox_client.py PROBE [PROBE...]
Each probe's result is {"ok": bool, ...details}; nothing here decides what
should happen, the gate compares the report with its expectations.
"""
import http.client
import json
import os
import socket
import sys
import urllib.request

TIMEOUT = 5


def direct_tcp(host, port):
    """Connects without the proxy (what code that ignores HTTPS_PROXY does)."""
    try:
        with socket.create_connection((host, port), timeout=TIMEOUT) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            return {"ok": True, "reply": s.recv(200).decode("latin-1")}
    except OSError as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def dns_udp(server):
    """A raw DNS query for example.com to `server`:53."""
    query = (b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
             b"\x07example\x03com\x00\x00\x01\x00\x01")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(2)
            s.sendto(query, (server, 53))
            data, _ = s.recvfrom(512)
            return {"ok": True, "bytes": len(data)}
    except OSError as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def resolve(name):
    """The sandbox's own resolver (there must be none that answers)."""
    try:
        return {"ok": True, "answer": [a[4][0] for a in socket.getaddrinfo(name, 80)]}
    except OSError as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def proxy_address():
    url = os.environ.get("HTTPS_PROXY", "")
    if not url.startswith("http://"):
        return None
    host, _, port = url[len("http://"):].rstrip("/").partition(":")
    return host, int(port)


def tunnel(authority):
    """CONNECT through HTTPS_PROXY, then a plain HTTP GET in the tunnel."""
    proxy = proxy_address()
    if proxy is None:
        return {"ok": False, "error": "no HTTPS_PROXY in the environment"}
    host, _, port = authority.rpartition(":")
    conn = http.client.HTTPConnection(proxy[0], proxy[1], timeout=TIMEOUT)
    conn.set_tunnel(host, int(port))
    try:
        conn.request("GET", "/")
        response = conn.getresponse()
        return {"ok": response.status == 200, "status": response.status,
                "body": response.read(200).decode("latin-1")}
    except OSError as e:
        # http.client raises OSError("Tunnel connection failed: 403 ...").
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    finally:
        conn.close()


def absolute_form(url):
    """Plain HTTP through the proxy (absolute-form GET, no CONNECT)."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as r:
            return {"ok": True, "status": r.status}
    except urllib.error.HTTPError as e:
        return {"ok": False, "status": e.code,
                "reason": e.headers.get("X-Airlock-Egress-Reason")}
    except OSError as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def run(probe):
    kind, _, arg = probe.partition("=")
    if kind == "tcp":
        host, _, port = arg.rpartition(":")
        return direct_tcp(host, int(port))
    if kind == "dns":
        return dns_udp(arg)
    if kind == "resolve":
        return resolve(arg)
    if kind == "tunnel":
        return tunnel(arg)
    if kind == "absolute":
        return absolute_form(arg)
    raise SystemExit(f"unknown probe {probe!r}")


if __name__ == "__main__":
    print(json.dumps({p: run(p) for p in sys.argv[1:]}))
