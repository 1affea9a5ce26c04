"""The request handler both origins share: reading and dispatching a request, stats accounting
(in flight until the last write), applying injected faults, error answers in the Hub's shape,
and file bodies with Range (206/416) and the body faults."""

import http.server
import json
import os
import socket
import ssl
import struct
import time
import traceback
import urllib.parse

from .common import PLAIN_PREFIX, HubError, log
from .shaping import BodyCopy

# A client POSTing more than this is broken; refusing bounds our memory.
MAX_REQUEST_BODY = 16 << 20
# Idle keep-alive connections each hold a thread; drop them after this long.
CONNECTION_IDLE_TIMEOUT_S = 300


def parse_range(header, size):
    """For a Range header: None to serve the whole body (absent, multi-range or malformed: all
    legal to ignore), "unsatisfiable", or (first, last) inclusive."""
    if header is None:
        return None
    unit, _, spec = header.strip().partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, sep, last = spec.strip().partition("-")
    if not sep:
        return None
    try:
        if first == "":  # suffix: the last N bytes
            n = int(last)
            if n <= 0:
                return "unsatisfiable"
            return (max(0, size - n), size - 1) if size > 0 else "unsatisfiable"
        a = int(first)
        b = int(last) if last != "" else None
    except ValueError:
        return None
    if a < 0 or (b is not None and b < a):
        return None
    if a >= size:
        return "unsatisfiable"
    return a, size - 1 if b is None else min(b, size - 1)


class Handler(BodyCopy, http.server.BaseHTTPRequestHandler):
    """What both origins share: dispatch, counting, faults, responses and file bodies. The
    route mixins (routes_*.py) supply handle_api / handle_cdn / handle_control."""

    protocol_version = "HTTP/1.1"
    server_version = "hubfs-local-hub/1"
    timeout = CONNECTION_IDLE_TIMEOUT_S
    origin = None  # "api" or "cdn", set by the subclasses below

    # --- plumbing ---------------------------------------------------------------------------

    def setup(self):
        if self.server.tls_context is not None:
            self.request.settimeout(self.timeout)
            try:
                self.request.do_handshake()
            except (ssl.SSLError, OSError) as e:
                # A client that does not trust the certificate hangs up here: counted, so a test
                # can tell how many attempts it made. tls_refused_by_client counts only the
                # handshakes the client ended with an alert (it refused the certificate); a
                # client that gave up waiting (a timeout on a loaded machine, which it may
                # retry) leaves without one and is counted in tls_handshake_failures alone.
                self.server.state.stats.add("tls_handshake_failures", 1)
                if isinstance(e, ssl.SSLError) and "ALERT" in str(getattr(e, "reason", "") or ""):
                    self.server.state.stats.add("tls_refused_by_client", 1)
                raise ConnectionError("TLS handshake failed: %s" % e)
            self.server.state.stats.add("tls_handshakes", 1)
        super().setup()
        # Headers and body leave in separate writes (the body by sendfile); without NODELAY,
        # Nagle plus delayed ACK would add ~40 ms to small responses.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):
        if self.server.state.verbose:
            log("%s %s" % (self.address_string(), fmt % args))

    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_POST(self):
        self._dispatch("POST")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def _dispatch(self, method):
        state = self.server.state
        self.method = method
        self.status_sent = None
        self.counted = False  # in the stats' in-flight count
        self.is_control = self.origin == "api" and self.path.startswith("/_hubfs/")
        split = urllib.parse.urlsplit(self.path)
        self.raw_path = split.path
        self.query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        self.body = self._read_body()
        if self.body is None:
            return
        if self.is_control:
            return self._guard(self.handle_control)  # control traffic: no counters, no latency
        path = urllib.parse.unquote(self.raw_path)
        kind = self._kind()
        self.trace_entry = state.stats.begin(self.origin, kind, method, path, self.headers)
        self.counted = True
        self.fault_path = path
        # A retry of the same request has the same key (a signed URL's query may change, its
        # path and range do not); see max_consecutive.
        self.fault_key = (self.origin, method, path, self.headers.get("Range"))
        self.faulted = False
        self.settled = False
        self.quota_headers = {}
        try:
            state.shaping.delay()
            if not self._charge_quota(kind):
                return
            fault = self.take_fault("request")
            if fault is not None and self._apply_request_fault(fault):
                return
            self._guard(self.handle_cdn if self.origin == "cdn" else self.handle_api)
        finally:
            self.mark_done()  # settles the streak too, if nothing did before

    def _charge_quota(self, kind):
        """Counts the request against its bucket's quota (quotas.py); every answer to it then
        carries the RateLimit headers. Over quota: answers 429 and returns False."""
        bucket = {"api": "api", "resolve": "resolvers"}.get(kind)
        quotas = self.server.state.quotas
        if bucket is None or not quotas.enabled(bucket):
            return True
        auth = self.headers.get("Authorization") or ""
        caller = auth[len("Bearer "):].strip() if auth.startswith("Bearer ") else None
        allowed, self.quota_headers = quotas.charge(bucket, caller)
        if allowed:
            return True
        self.server.state.stats.add("rate_limited", 1)
        self.send_hub_error(HubError(429, None, "You have exceeded our %r rate limit quota for this %d-second "
                                     "window; log in (a token) for a larger quota" % (bucket, quotas.window_s)))
        return False

    def take_fault(self, phase):
        """The fault for this request at this phase, counted, or None."""
        state = self.server.state
        fault = state.faults.take(self.origin, self.method, self.fault_path, phase, self.fault_key)
        if fault is not None:
            state.stats.add("faults_injected", 1)
            self.faulted = True
            # Settled before the faulty answer goes out: the client's retry can arrive before
            # this handler's `finally` runs, and must count this fault in its streak.
            state.faults.settle(self.fault_key, True)
            self.settled = True
        return fault

    def _kind(self):
        if self.origin == "cdn":
            return "cas" if self.raw_path.startswith(("/v1/", "/v2/")) else "cdn"
        if self.raw_path.startswith(("/api/resolve-chain/", "/api/resolve-cache/")):
            return "resolve"
        if self.raw_path.startswith("/api/"):
            return "api"
        if self.raw_path.startswith(PLAIN_PREFIX):
            return "plain"
        return "resolve" if "/resolve/" in self.raw_path else "other"

    def _guard(self, fn):
        try:
            fn()
        except HubError as e:
            self.send_hub_error(e)
        except (ConnectionError, socket.timeout, TimeoutError):
            self.close_connection = True
        except Exception as e:  # a bug here must answer 500, not hang the client
            log("internal error on %s %s: %r" % (self.method, self.path, e))
            traceback.print_exc()
            if self.status_sent is None:
                self.send_hub_error(HubError(500, None, "internal server error: %r" % e))
            else:
                self.close_connection = True

    def _read_body(self):
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        try:
            n = int(length)
        except ValueError:
            n = -1
        if n < 0 or n > MAX_REQUEST_BODY:
            self.close_connection = True
            self.send_hub_error(HubError(413, None, "request body too large or bad Content-Length"))
            return None
        return self.rfile.read(n)

    def mark_done(self):
        """Leaves the in-flight count. Called just BEFORE the response's last write: once the
        client has the last byte it may send its next request on another connection, and that
        one must not see this one still in flight, or peak_concurrency would over-count."""
        if not getattr(self, "settled", True):
            # A request no fault struck ends its key's streak here, for the same reason: its
            # client's next try of the same request may come before `finally` (a test saw
            # [500, 200, 200, 502] where the streak rule makes it [500, 200, 502, 200]).
            self.settled = True
            self.server.state.faults.settle(self.fault_key, self.faulted)
        if self.counted:
            self.counted = False
            self.server.state.stats.end(self.status_sent, self.trace_entry)

    def start_response(self, status, headers, last_write=False):
        self.status_sent = status
        self.send_response(status)
        for k, v in getattr(self, "quota_headers", {}).items():
            self.send_header(k, str(v))
        for k, v in headers.items():
            self.send_header(k, str(v))
        if last_write:
            self.mark_done()
        self.end_headers()

    def send_bytes(self, status, body, headers=None, content_type="application/json"):
        headers = dict(headers or {})
        headers.setdefault("Content-Type", content_type)
        headers["Content-Length"] = len(body)
        has_body = self.method != "HEAD" and len(body) > 0
        self.start_response(status, headers, last_write=not has_body)
        if has_body:
            if not self.is_control:
                self.server.state.stats.add("bytes_sent", len(body))
            self.mark_done()
            self.wfile.write(body)

    def send_json(self, status, obj, headers=None):
        self.send_bytes(status, json.dumps(obj).encode(), headers)

    def send_hub_error(self, e, body_bytes=None):
        headers = dict(e.headers)
        if e.code:
            headers["X-Error-Code"] = e.code
        # Header values must be one latin-1 line.
        headers["X-Error-Message"] = e.message.replace("\n", " ").encode("latin-1", "replace").decode("latin-1")
        body = json.dumps({"error": e.message}).encode()
        if body_bytes is not None and body_bytes > len(body):
            body += b" " * (body_bytes - len(body))  # trailing whitespace: still the same JSON
        self.send_bytes(e.status, body, headers)

    def _apply_request_fault(self, fault):
        """Returns True when the fault answered (or killed) the request."""
        if fault.status is not None:
            headers = dict(fault.spec.get("headers") or {})
            if fault.spec.get("retry_after") is not None:
                headers["Retry-After"] = fault.spec["retry_after"]
            self.send_hub_error(HubError(fault.status, fault.spec.get("error_code"),
                                         "injected fault: status %d" % fault.status, headers),
                                body_bytes=fault.body_bytes)
            return True
        if fault.mode == "reset":
            self.reset_connection()
            return True
        if fault.mode == "stall":
            time.sleep(fault.stall_ms / 1000.0)
        return False

    def reset_connection(self):
        # SO_LINGER 0 makes close() send RST: the client sees "connection reset by peer".
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    # --- file bodies ------------------------------------------------------------------------

    def send_file(self, f, size, headers):
        """Answers with the bytes of an open file, honouring Range (206/416) and the faults and
        bandwidth limit that apply to bodies."""
        state = self.server.state
        rng = parse_range(self.headers.get("Range"), size)
        headers = dict(headers)
        headers["Accept-Ranges"] = "bytes"
        headers.setdefault("Content-Type", "application/octet-stream")
        if rng == "unsatisfiable":
            headers["Content-Range"] = "bytes */%d" % size
            raise HubError(416, None, "range not satisfiable for a file of %d bytes" % size, headers)
        if rng is not None:
            fault = self.take_fault("range_body")
            if fault is not None:
                if fault.mode == "ignore_range":
                    rng = None
                elif fault.mode == "spurious_416":
                    # A CDN edge refusing a range that is inside the file (a caching rule did
                    # this on the Hub's CDN): the 416 names the file's real size.
                    headers["Content-Range"] = "bytes */%d" % size
                    raise HubError(416, None, "range not satisfiable (injected: the range was valid)", headers)
                else:  # bad_content_range: the right bytes, labelled one byte off
                    headers["Content-Range"] = "bytes %d-%d/%d" % (rng[0] + 1, rng[1] + 1, size)
        if rng is None:
            status, offset, count = 200, 0, size
        else:
            status, offset, count = 206, rng[0], rng[1] - rng[0] + 1
            headers.setdefault("Content-Range", "bytes %d-%d/%d" % (rng[0], rng[1], size))
        headers["Content-Length"] = count
        cut_after = None
        body_fault = None
        if self.method != "HEAD" and count > 0:
            body_fault = self.take_fault("body")
            if body_fault is not None and body_fault.mode in ("reset", "truncate"):
                asked = body_fault.after_bytes
                cut_after = min(asked if asked is not None else count // 2, count)
        self.start_response(status, headers, last_write=self.method == "HEAD" or count == 0)
        if self.method == "HEAD":
            return
        if body_fault is not None and body_fault.mode == "flip_byte":
            self._send_flipped(f, offset, count, body_fault.flip_offset)
            return
        to_send = count if cut_after is None else cut_after
        sent = self._copy_body(f, offset, to_send)
        if cut_after is not None and body_fault.mode == "reset":
            self.reset_connection()
        elif cut_after is not None:
            self.finish_connection()
        elif sent < count:
            self.close_connection = True

    def _send_flipped(self, f, offset, count, flip_offset):
        """The body with one byte inverted (not through sendfile: the bytes must be touched)."""
        flip = min(flip_offset if flip_offset is not None else count // 2, count - 1)
        sent = self._copy_body(f, offset, flip)
        if sent < flip:
            self.close_connection = True
            return
        byte = os.pread(f.fileno(), 1, offset + flip)
        if len(byte) != 1:
            self.close_connection = True
            return
        self.server.state.stats.add("bytes_sent", 1)
        if flip + 1 == count:
            self.mark_done()
        self.wfile.write(bytes([byte[0] ^ 0xFF]))
        if flip + 1 < count and self._copy_body(f, offset + flip + 1, count - flip - 1) < count - flip - 1:
            self.close_connection = True

    def finish_connection(self):
        """An orderly close (FIN) right now, whatever the headers promised."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
        except OSError:
            pass
