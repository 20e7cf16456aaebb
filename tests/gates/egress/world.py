"""The test's stand-in for the internet, run in a network namespace of its own.

Started by netlab.py with `unshare -n`. It waits for one line on stdin (the
namespace's addresses are configured by then), binds a sink on every
address:port given as arguments (TCP, and UDP for port 53), prints "ready",
and serves until stdin reaches end of file. Then it prints one JSON object:
{"tcp 93.184.216.34:80": <connections>, "udp 8.8.8.8:53": <datagrams>, ...}.

A TCP sink answers one HTTP response naming the sink and closes.
"""
import json
import selectors
import socket
import sys
import threading


def main(endpoints):
    print("started", flush=True)
    sys.stdin.readline()
    hits = {}
    selector = selectors.DefaultSelector()
    for endpoint in endpoints:
        host, _, port = endpoint.rpartition(":")
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        tcp.bind((host, int(port)))
        tcp.listen(16)
        tcp.setblocking(False)
        selector.register(tcp, selectors.EVENT_READ, ("tcp", endpoint))
        hits["tcp " + endpoint] = 0
        if int(port) == 53:
            udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            udp.bind((host, 53))
            udp.setblocking(False)
            selector.register(udp, selectors.EVENT_READ, ("udp", endpoint))
            hits["udp " + endpoint] = 0
    print("ready", flush=True)

    done = threading.Event()

    def wait_for_eof():
        sys.stdin.read()
        done.set()

    threading.Thread(target=wait_for_eof, daemon=True).start()
    while not done.is_set():
        for key, _ in selector.select(timeout=0.1):
            kind, endpoint = key.data
            if kind == "udp":
                try:
                    key.fileobj.recvfrom(2048)
                except BlockingIOError:
                    continue
                hits["udp " + endpoint] += 1
                continue
            try:
                conn, _ = key.fileobj.accept()
            except BlockingIOError:
                continue
            hits["tcp " + endpoint] += 1
            threading.Thread(target=answer, args=(conn, endpoint), daemon=True).start()
    print(json.dumps(hits), flush=True)


def answer(conn, endpoint):
    with conn:
        conn.settimeout(5)
        try:
            conn.recv(4096)
            body = f"hello from sink {endpoint}\n".encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() +
                         b"\r\nConnection: close\r\n\r\n" + body)
        except OSError:
            pass


if __name__ == "__main__":
    main(sys.argv[1:])
