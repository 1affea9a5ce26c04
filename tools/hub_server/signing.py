"""Signed, expiring CDN URLs: HMAC over (sha256, expires), checked by the CDN origin, and the key
rotation behind POST /_hubfs/expire."""

import hashlib
import hmac
import secrets
import threading
import time


class UrlSigner:
    """HMAC-signed, expiring blob URLs. expire_all() rotates the key: every URL handed out so far
    fails from then on, which is how tests make a client re-resolve."""

    def __init__(self, ttl):
        self.ttl = ttl
        self._key = secrets.token_bytes(32)
        self._lock = threading.Lock()

    def sign(self, sha256):
        # Rounded up, so a URL stays valid for at least ttl seconds (even ttl=1).
        expires = int(time.time()) + self.ttl + 1
        return expires, self._sig(sha256, expires)

    def check(self, sha256, expires, sig):
        """None when valid, else why not."""
        try:
            expires_at = int(expires)
        except (TypeError, ValueError):
            return "missing or malformed expires"
        if not sig or not hmac.compare_digest(self._sig(sha256, expires_at), sig):
            return "signature does not match"
        if expires_at <= time.time():
            return "Request has expired"
        return None

    def expire_all(self):
        with self._lock:
            self._key = secrets.token_bytes(32)

    def _sig(self, sha256, expires):
        with self._lock:
            key = self._key
        return hmac.new(key, ("%s:%d" % (sha256, expires)).encode(), hashlib.sha256).hexdigest()
