"""The counters GET /_hubfs/stats reports: request kinds, bytes, faults, TLS handshakes, requests
in flight (now, peak, and integrated over time), by_path and by_status."""

import threading
import time

# by_path in /_hubfs/stats stops adding new paths past this, so a long benchmark cannot grow it
# without bound.
MAX_TRACKED_PATHS = 10000
# GET /_hubfs/trace keeps the last this many requests (begin/end times, kind, range, status):
# enough for any one benchmark read, bounded for a long-running server.
MAX_TRACE = 20000


class Stats:
    FIELDS = ("requests", "api_requests", "resolve_requests", "cdn_requests", "plain_requests",
              "bytes_sent", "peak_concurrency", "cdn_authorization_headers", "range_requests",
              "head_requests", "faults_injected", "tls_handshakes", "tls_handshake_failures", "tls_refused_by_client",
              "rate_limited", "xet_token_requests", "xet_reconstructions", "xorb_requests", "xorb_bytes",
              "xorb_authorization_headers", "refused_ranges")

    def __init__(self):
        self._lock = threading.Lock()
        self._in_flight = 0
        self.reset()

    def _advance(self):
        """Adds the time since the last change, weighted by the requests in flight, to
        in_flight_seconds: its growth over a read divided by the read's wall time is the mean
        number of requests in flight, which the peak alone does not tell. Lock held."""
        now = time.monotonic()
        self._in_flight_seconds += self._in_flight * (now - self._changed)
        self._changed = now

    def reset(self):
        with self._lock:
            self._in_flight_seconds = 0.0
            self._changed = time.monotonic()
            self._counts = dict.fromkeys(self.FIELDS, 0)
            # Requests still running when the counters are zeroed keep counting toward the peak.
            self._counts["peak_concurrency"] = self._in_flight
            self._by_path = {}
            self._by_status = {}
            self._trace = []
            self._epoch = time.monotonic()

    def begin(self, origin, kind, method, path, headers):
        """Counts a request; returns its trace entry (for end())."""
        with self._lock:
            c = self._counts
            c["requests"] += 1
            if origin == "cdn":
                c["cdn_requests"] += 1
                # The CAS API on this origin takes the Xet token; blobs and xorbs must not.
                if headers.get("Authorization") is not None and kind != "cas":
                    c["cdn_authorization_headers"] += 1
            elif kind == "api":
                c["api_requests"] += 1
            elif kind == "resolve":
                c["resolve_requests"] += 1
            elif kind == "plain":
                c["plain_requests"] += 1
            if headers.get("Range") is not None:
                c["range_requests"] += 1
            if method == "HEAD":
                c["head_requests"] += 1
            if path in self._by_path or len(self._by_path) < MAX_TRACKED_PATHS:
                self._by_path[path] = self._by_path.get(path, 0) + 1
            self._advance()
            self._in_flight += 1
            c["peak_concurrency"] = max(c["peak_concurrency"], self._in_flight)
            entry = {"begin": round(time.monotonic() - self._epoch, 6), "kind": kind, "method": method,
                     "path": path, "range": headers.get("Range")}
            if len(self._trace) < MAX_TRACE:
                self._trace.append(entry)
            return entry

    def trace(self):
        """The requests since the last reset: seconds since the reset at which each began and
        ended (absent while in flight), kind, method, path, Range header and status."""
        with self._lock:
            return [dict(e) for e in self._trace]

    def end(self, status, entry=None):
        with self._lock:
            if entry is not None:
                entry["end"] = round(time.monotonic() - self._epoch, 6)
                entry["status"] = status
            self._advance()
            self._in_flight -= 1
            if status is not None:
                self._by_status[str(status)] = self._by_status.get(str(status), 0) + 1

    def add(self, field, n):
        with self._lock:
            self._counts[field] += n

    def snapshot(self):
        with self._lock:
            out = dict(self._counts)
            out["in_flight"] = self._in_flight
            self._advance()
            out["in_flight_seconds"] = self._in_flight_seconds
            out["by_path"] = dict(self._by_path)
            out["by_status"] = dict(self._by_status)
            return out


# GET /_hubfs/refused-ranges quotes at most this many refused requests (the count is exact).
MAX_REFUSED_SAMPLES = 20


class RefusedRanges:
    """Xorb requests refused for their Range under --strict-xet-ranges on: a client that asked
    for bytes its URL does not sign, which the real service refuses too (issue 39). Kept for the
    server's whole life (POST /_hubfs/reset does not clear them): each test's launcher reads them
    at shutdown and fails the test unless it said it sends such ranges on purpose (POST
    /_hubfs/refused-ranges/expect)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._count = 0
        self._samples = []
        self._expected = False

    def add(self, path, range_header, why):
        with self._lock:
            self._count += 1
            if len(self._samples) < MAX_REFUSED_SAMPLES:
                self._samples.append({"path": path, "range": range_header, "why": why})

    def expect(self):
        with self._lock:
            self._expected = True

    def snapshot(self):
        with self._lock:
            return {"count": self._count, "expected": self._expected, "samples": list(self._samples)}
