#!/usr/bin/python3
"""A minimal forward proxy for tests: plain-http requests in absolute form (GET http://h:p/x)
and CONNECT tunnels (for https). Every request is appended to --log as one line
("GET http://127.0.0.1:4000/api/..." or "CONNECT 127.0.0.1:4001"), so a test can tell which
requests went through it. Each plain request is answered on its own connection (Connection:
close), which keeps the forwarding a byte copy. Writes its port to --port-file once listening;
exits when stdin closes (the test holds the other end)."""

import argparse
import os
import socket
import sys
import threading
import urllib.parse


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def read_head(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


def handle(conn, log, lock):
    try:
        head, rest = read_head(conn)
        if head is None:
            return
        lines = head.split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        with lock:
            log.write("%s %s\n" % (method, target))
            log.flush()
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                upstream.sendall(rest)
            t = threading.Thread(target=pipe, args=(upstream, conn), daemon=True)
            t.start()
            pipe(conn, upstream)
            t.join()
            return
        url = urllib.parse.urlsplit(target)
        upstream = socket.create_connection((url.hostname, url.port or 80))
        path = url.path + ("?" + url.query if url.query else "")
        headers = [h for h in lines[1:]
                   if h.split(":", 1)[0].strip().lower() not in ("connection", "proxy-connection")]
        length = 0
        for h in headers:
            name, _, value = h.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        while len(rest) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            rest += chunk
        request = "\r\n".join(["%s %s %s" % (method, path, version)] + headers + ["Connection: close", "", ""])
        upstream.sendall(request.encode("latin-1") + rest)
        pipe(upstream, conn)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--log", required=True)
    p.add_argument("--port-file", required=True)
    args = p.parse_args()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    log = open(args.log, "a")
    lock = threading.Lock()
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.getsockname()[1])
    os.rename(tmp, args.port_file)

    def watch_stdin():
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    threading.Thread(target=watch_stdin, daemon=True).start()
    while True:
        conn, _ = server.accept()
        threading.Thread(target=handle, args=(conn, log, lock), daemon=True).start()


if __name__ == "__main__":
    main()
