"""Fault injection: validating a fault spec (every kind: status, reset, stall, ignore_range,
bad_content_range, truncate, flip_byte), the queue of pending faults, matching a request at a
phase (request, range_body, body), and the per-request-key streaks behind max_consecutive. The
handlers apply what take() returns (handler.py)."""

import re
import threading

# How long a "stall" fault holds a request by default (a cold CDN object stalls ~3 s in the
# wild; longer than that so a client's per-read timeout is what ends it), and at most.
DEFAULT_STALL_MS = 10000
MAX_STALL_MS = 120000
FAULT_MODES = ("ignore_range", "bad_content_range", "spurious_416", "reset", "stall", "truncate", "flip_byte")
# max_consecutive remembers, per request key, how many requests in a row were faulted; past this
# many keys (a long stress run touching many distinct ranges) the memory is simply started over.
MAX_TRACKED_STREAKS = 100000
# The largest error body a status fault may ask for with "body_bytes".
MAX_FAULT_BODY = 64 << 20


class Fault:
    """One queued misbehaviour, applied to the next `count` (default 1) matching requests of
    either origin. Exactly one of:
      "status": N       answer N with a Hub-style error body (+ "retry_after": s -> Retry-After,
                        "headers": {...} extra headers, "error_code": X-Error-Code)
      "mode": "reset"   close the connection with RST instead of answering; with
                        "after_bytes": n, send the headers and n body bytes first
      "mode": "stall"   hold the request "stall_ms" (default 10000) and then answer normally
      "mode": "ignore_range"       answer a ranged file request 200 with the whole file
      "mode": "bad_content_range"  answer 206 with the right bytes but Content-Range one off
      "mode": "spurious_416"  answer a valid range 416 with Content-Range: bytes */<size>, as
                        the Hub's CDN did (datasets#7685); huggingface_hub retries it
      "mode": "truncate" send the headers (Content-Length: the full body) and "after_bytes"
                        body bytes (default: half of them), then close the connection cleanly
                        (FIN, not RST): a body cut short that only its length gives away
      "mode": "flip_byte"  send the whole body, right length and headers, with the byte at
                        "flip_offset" (default: the middle of the body) inverted: corruption in
                        transit that no header reveals
    With "status", "body_bytes": n pads the error body to n bytes (an error body longer than
    the range that was asked for).
    Filters: "path_contains" (substring of the decoded path), "origin" ("api"|"cdn"),
    "method", "range_regex" (re.search on the request's Range header; a request without one
    does not match: "^bytes=[0-9]" picks ranges with a start, not suffix ranges). Body modes wait for a request that serves a (ranged) file body.
    "max_consecutive": k  the fault passes over a request when the last k requests with the same
    key (origin, method, path, Range) were all faulted (by any fault): a client that retries the
    same request can always get through after k failures in a row."""

    KEYS = {"status", "count", "path_contains", "retry_after", "mode", "origin", "method",
            "headers", "error_code", "stall_ms", "after_bytes", "body_bytes", "flip_offset",
            "max_consecutive", "range_regex"}

    def __init__(self, spec):
        if not isinstance(spec, dict):
            raise ValueError("a fault is a JSON object")
        unknown = set(spec) - self.KEYS
        if unknown:
            raise ValueError("unknown fault keys %s; known: %s" % (sorted(unknown), sorted(self.KEYS)))
        self.spec = spec
        self.status = spec.get("status")
        self.mode = spec.get("mode")
        if (self.status is None) == (self.mode is None):
            raise ValueError('a fault needs exactly one of "status" or "mode"')
        if self.status is not None and not (isinstance(self.status, int) and 100 <= self.status <= 599):
            raise ValueError("status must be an HTTP status code")
        if self.mode is not None and self.mode not in FAULT_MODES:
            raise ValueError("mode must be one of %s" % (FAULT_MODES,))
        self.remaining = spec.get("count", 1)
        if not isinstance(self.remaining, int) or self.remaining < 1:
            raise ValueError("count must be a positive integer")
        self.path_contains = spec.get("path_contains")
        self.range_regex = None
        if spec.get("range_regex") is not None:
            try:
                self.range_regex = re.compile(spec["range_regex"])
            except (re.error, TypeError) as e:
                raise ValueError("range_regex: %s" % e)
        self.origin = spec.get("origin")
        if self.origin not in (None, "api", "cdn"):
            raise ValueError('origin must be "api" or "cdn"')
        self.method = spec.get("method")
        if self.method is not None:
            self.method = str(self.method).upper()
        self.stall_ms = spec.get("stall_ms", DEFAULT_STALL_MS)
        if not isinstance(self.stall_ms, int) or not 0 <= self.stall_ms <= MAX_STALL_MS:
            raise ValueError("stall_ms must be an integer in [0, %d]" % MAX_STALL_MS)
        self.after_bytes = spec.get("after_bytes")
        if self.after_bytes is not None and (not isinstance(self.after_bytes, int) or self.after_bytes < 0):
            raise ValueError("after_bytes must be a non-negative integer")
        if self.after_bytes is not None and self.mode not in ("reset", "truncate"):
            raise ValueError('after_bytes goes with mode "reset" or "truncate"')
        self.flip_offset = spec.get("flip_offset")
        if self.flip_offset is not None and (not isinstance(self.flip_offset, int) or self.flip_offset < 0):
            raise ValueError("flip_offset must be a non-negative integer")
        if self.flip_offset is not None and self.mode != "flip_byte":
            raise ValueError('flip_offset goes with mode "flip_byte"')
        self.body_bytes = spec.get("body_bytes")
        if self.body_bytes is not None and (not isinstance(self.body_bytes, int)
                                            or not 0 <= self.body_bytes <= MAX_FAULT_BODY):
            raise ValueError("body_bytes must be an integer in [0, %d]" % MAX_FAULT_BODY)
        if self.body_bytes is not None and self.status is None:
            raise ValueError('body_bytes goes with "status"')
        self.max_consecutive = spec.get("max_consecutive")
        if self.max_consecutive is not None and (not isinstance(self.max_consecutive, int)
                                                 or self.max_consecutive < 1):
            raise ValueError("max_consecutive must be a positive integer")
        # Faults that shape a body (or cut one short) wait for a request that serves a body;
        # the others strike as soon as a matching request arrives.
        if self.mode in ("ignore_range", "bad_content_range", "spurious_416"):
            self.phase = "range_body"
        elif (self.mode == "reset" and self.after_bytes is not None) or self.mode in ("truncate", "flip_byte"):
            self.phase = "body"
        else:
            self.phase = "request"

    def matches(self, origin, method, path, phase, streak, range_header=None):
        return (phase == self.phase
                and (self.range_regex is None
                     or (range_header is not None and self.range_regex.search(range_header) is not None))
                and (self.origin is None or self.origin == origin)
                and (self.method is None or self.method == method)
                and (self.path_contains is None or self.path_contains in path)
                and (self.max_consecutive is None or streak < self.max_consecutive))


class FaultTable:
    def __init__(self):
        self._lock = threading.Lock()
        self._faults = []
        self._streaks = {}  # request key -> requests in a row with that key that were faulted

    def add(self, specs):
        faults = [Fault(s) for s in specs]  # validate all before adding any
        with self._lock:
            self._faults.extend(faults)

    def clear(self):
        # Streaks survive: a test that re-arms its faults in rounds must not let one request be
        # faulted max_consecutive times in each round, back to back.
        with self._lock:
            self._faults = []

    def pending(self):
        with self._lock:
            return [dict(f.spec, count=f.remaining) for f in self._faults]

    def settle(self, key, faulted):
        """Records how a request with this key ended, for max_consecutive."""
        with self._lock:
            if not faulted:
                self._streaks.pop(key, None)
                return
            if len(self._streaks) >= MAX_TRACKED_STREAKS and key not in self._streaks:
                self._streaks = {}
            self._streaks[key] = self._streaks.get(key, 0) + 1

    def take(self, origin, method, path, phase, key=None):
        """The first pending fault matching this request, with one use consumed, or None."""
        with self._lock:
            streak = self._streaks.get(key, 0)
            for i, f in enumerate(self._faults):
                if f.matches(origin, method, path, phase, streak, key[3] if key else None):
                    f.remaining -= 1
                    if f.remaining == 0:
                        del self._faults[i]
                    return f
        return None


# ---------------------------------------------------------------------------------------------
# HTTP
