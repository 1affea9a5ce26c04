"""Request quotas as the Hub enforces them: fixed windows per bucket ("api" for /api/ calls,
"resolvers" for /resolve/ URLs) and per caller (a token, or anonymous), announced on every
counted response with the IETF draft headers the Hub sends

    RateLimit: "api";r=REMAINING;t=SECONDS_UNTIL_THE_WINDOW_RESETS
    RateLimit-Policy: "fixed window";"api";q=QUOTA;w=WINDOW_SECONDS

and answered 429 once a window's quota is spent, until the window resets. Windows are aligned
on multiples of their length (a fixed window, not a sliding one). The clock is injectable so the
module's own arithmetic can be tested without waiting."""

import math
import threading
import time

BUCKETS = ("api", "resolvers")


def parse_quota_spec(text):
    """"api=30,resolvers=200" -> {"api": 30, "resolvers": 200}; raises ValueError."""
    out = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in BUCKETS:
            raise ValueError("a quota is BUCKET=N with BUCKET one of %s, got %r" % (BUCKETS, part))
        n = int(value)
        if n < 0:
            raise ValueError("a quota cannot be negative: %r" % part)
        out[name] = n
    return out


class QuotaTable:
    """Counts requests per (bucket, caller) in fixed windows. A bucket without a quota is not
    limited (and announces nothing), as on a server with quotas switched off."""

    def __init__(self, quotas, window_s, clock=time.time):
        self.quotas = dict(quotas)
        self.window_s = window_s
        self.clock = clock
        self._lock = threading.Lock()
        self._used = {}  # (bucket, caller) -> (window index, requests counted in it)
        self.rejected = 0

    def enabled(self, bucket):
        return bucket in self.quotas

    def charge(self, bucket, caller):
        """Counts one request. Returns (allowed, headers): the two RateLimit headers for this
        bucket after the request (remaining 0 and allowed False once the quota is spent)."""
        if bucket not in self.quotas:
            return True, {}
        quota = self.quotas[bucket]
        now = self.clock()
        window = int(now // self.window_s)
        reset_in = max(1, int(math.ceil((window + 1) * self.window_s - now)))
        with self._lock:
            seen_window, used = self._used.get((bucket, caller), (window, 0))
            if seen_window != window:
                used = 0
            allowed = used < quota
            if allowed:
                used += 1
            else:
                self.rejected += 1
            self._used[(bucket, caller)] = (window, used)
        headers = {
            "RateLimit": '"%s";r=%d;t=%d' % (bucket, quota - used, reset_in),
            "RateLimit-Policy": '"fixed window";"%s";q=%d;w=%d' % (bucket, quota, self.window_s),
        }
        return allowed, headers

    def snapshot(self):
        """The current window's use per bucket and caller (callers shown as "anonymous" or
        "token:<first 4 characters>"), for /_hubfs/quotas."""
        now = self.clock()
        window = int(now // self.window_s)
        out = {"window_s": self.window_s, "quotas": dict(self.quotas), "rejected": self.rejected, "used": {}}
        with self._lock:
            for (bucket, caller), (w, used) in self._used.items():
                if w == window:
                    shown = "anonymous" if caller is None else "token:" + caller[:4]
                    out["used"]["%s/%s" % (bucket, shown)] = used
        return out
