"""Signed, expiring CDN URLs: HMAC over (sha256, expires), checked by the CDN origin, and the key
rotation behind POST /_hubfs/expire.

Three spellings of the same signature (--url-style), so clients meet the forms the real Hub's
redirects carry:
  local       ?expires=<unix>&sig=<hmac>
  s3          ?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=...&X-Amz-Date=<YYYYMMDDTHHMMSSZ>
              &X-Amz-Expires=<seconds>&X-Amz-SignedHeaders=host&X-Amz-Signature=<hmac>
              (S3 presigned URLs: lifetime relative to the signing time)
  cloudfront  ?Expires=<unix>&Signature=<hmac>&Key-Pair-Id=<id>   (CloudFront canned policy)
"""

import calendar
import hashlib
import hmac
import secrets
import threading
import time
import urllib.parse

URL_STYLES = ("local", "s3", "cloudfront")
# The key id a CloudFront signed URL names; any fixed string does for a stand-in.
KEY_PAIR_ID = "KLOCALHUBFS0001"


class UrlSigner:
    """HMAC-signed, expiring blob URLs. expire_all() rotates the key: every URL handed out so far
    fails from then on, which is how tests make a client re-resolve."""

    def __init__(self, ttl, style="local", clock=time.time):
        if style not in URL_STYLES:
            raise ValueError("url style must be one of %s" % (URL_STYLES,))
        self.ttl = ttl
        self.style = style
        self.clock = clock
        self._key = secrets.token_bytes(32)
        self._lock = threading.Lock()

    def sign(self, sha256):
        # Rounded up, so a URL stays valid for at least ttl seconds (even ttl=1).
        expires = int(self.clock()) + self.ttl + 1
        return expires, self._sig(sha256, expires)

    def signed_query(self, sha256):
        """The query string of a fresh signed URL for this blob, in the configured style."""
        if self.style == "s3":
            signed_at = int(self.clock())
            lifetime = self.ttl + 1
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(signed_at))
            return urllib.parse.urlencode([
                ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
                ("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD"),
                ("X-Amz-Credential", "LOCALHUBFS/%s/us-east-1/s3/aws4_request" % stamp[:8]),
                ("X-Amz-Date", stamp),
                ("X-Amz-Expires", str(lifetime)),
                ("X-Amz-SignedHeaders", "host"),
                ("X-Amz-Signature", self._sig(sha256, signed_at + lifetime)),
            ])
        expires, sig = self.sign(sha256)
        if self.style == "cloudfront":
            return urllib.parse.urlencode([("Expires", str(expires)), ("Signature", sig),
                                           ("Key-Pair-Id", KEY_PAIR_ID)])
        return "expires=%d&sig=%s" % (expires, sig)

    def check_query(self, sha256, query):
        """None when the URL's query (parse_qs form) holds a valid signature in any style,
        else why not, in the words S3/CloudFront use."""
        first = lambda k: (query.get(k) or [None])[0]  # noqa: E731
        if first("X-Amz-Signature") is not None:
            try:
                signed_at = calendar.timegm(time.strptime(first("X-Amz-Date") or "", "%Y%m%dT%H%M%SZ"))
                expires = int(signed_at) + int(first("X-Amz-Expires") or "")
            except (ValueError, OverflowError):
                return "malformed X-Amz-Date or X-Amz-Expires"
            return self.check(sha256, expires, first("X-Amz-Signature"))
        if first("Signature") is not None:
            if first("Key-Pair-Id") != KEY_PAIR_ID:
                return "unknown Key-Pair-Id"
            return self.check(sha256, first("Expires"), first("Signature"))
        return self.check(sha256, first("expires"), first("sig"))

    def check(self, sha256, expires, sig):
        """None when valid, else why not."""
        try:
            expires_at = int(expires)
        except (TypeError, ValueError):
            return "missing or malformed expires"
        if not sig or not hmac.compare_digest(self._sig(sha256, expires_at), sig):
            return "signature does not match"
        if expires_at <= self.clock():
            return "Request has expired"
        return None

    def expire_all(self):
        with self._lock:
            self._key = secrets.token_bytes(32)

    def _sig(self, sha256, expires):
        with self._lock:
            key = self._key
        return hmac.new(key, ("%s:%d" % (sha256, expires)).encode(), hashlib.sha256).hexdigest()
