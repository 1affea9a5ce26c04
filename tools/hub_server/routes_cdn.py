"""The CDN origin: GET|HEAD /blobs/{sha256}?<signature>, serving a blob resolve registered,
once its signature and expiry check out (any of the --url-style spellings, signing.py)."""

import os
import secrets

from .common import HubError
from . import xet
from .handler import parse_range


class CdnRoutes:
    """Handler mixin for the CDN origin."""

    def handle_cdn(self):
        state = self.server.state
        parts = self.raw_path.split("/")
        if state.xet is not None and len(parts) == 4 and parts[1] in ("v1", "v2") and parts[2] == "reconstructions":
            return self.handle_reconstruction(int(parts[1][1]), parts[3])
        if state.xet is not None and len(parts) == 4 and parts[1:3] == ["xorbs", "default"]:
            return self.handle_xorb(parts[3])
        if self.method not in ("GET", "HEAD") or len(parts) != 3 or parts[1] != "blobs":
            raise HubError(404, None, "the CDN serves only GET/HEAD /blobs/<sha256>")
        sha256 = parts[2]
        q = self.query
        why = state.signer.check_query(sha256, q)
        if why is not None:
            raise HubError(403, "AccessDenied", why)
        blob = state.blobs.get(sha256)
        if blob is None:
            raise HubError(404, "NoSuchKey", "no blob %s" % sha256)
        path, size, mtime_ns = blob
        try:
            f = open(path, "rb")
        except OSError:
            raise HubError(404, "NoSuchKey", "blob %s is gone" % sha256)
        with f:
            st = os.fstat(f.fileno())
            if (st.st_size, st.st_mtime_ns) != (size, mtime_ns):
                # The file was rewritten since it was hashed: these are not that blob's bytes.
                raise HubError(404, "NoSuchKey", "blob %s was replaced" % sha256)
            self.send_file(f, size, {"ETag": '"%s"' % sha256})

    def handle_reconstruction(self, version, xet_hash):
        """The CAS reconstruction API (xet.py): a bearer Xet token, an optional Range."""
        state = self.server.state
        if self.method != "GET":
            raise HubError(405, None, "reconstructions are GET only")
        why = state.xet_auth.check_token(self.headers.get("Authorization"))
        if why is not None:
            raise HubError(401, None, why)
        info = state.xet.by_hash(xet_hash)
        if info is None:
            raise HubError(404, None, "no file with Xet hash %s" % xet_hash)
        state.stats.add("xet_reconstructions", 1)
        self.send_json(200, xet.reconstruction(state.xet, state.xet_auth, info, state.cdn_url, version,
                                               self.headers.get("Range"), state.strict_xet_ranges))

    def handle_xorb(self, xorb):
        """A xorb's bytes from a signed URL (no Authorization expected): one signed range, or
        the URL's whole listed set as multipart/byteranges (RFC 9110 14.6), as huggingface.js
        XetBlob and xet-core's multi-range fetch ask for it."""
        state = self.server.state
        if self.method not in ("GET", "HEAD"):
            raise HubError(405, None, "xorbs are GET/HEAD only")
        range_header = self.headers.get("Range")
        why, refused_range = state.xet_auth.check_xorb(xorb, self.query, range_header, state.strict_xet_ranges)
        if why is not None:
            if refused_range and state.strict_xet_ranges:
                state.refused_ranges.add(self.raw_path, range_header, why)
                state.stats.add("refused_ranges", 1)
            raise HubError(403, "AccessDenied", why)
        path = state.xet.xorb_path(xorb)
        if path is None:
            raise HubError(404, "NoSuchKey", "no xorb %s" % xorb)
        state.stats.add("xorb_requests", 1)
        if self.headers.get("Authorization") is not None:
            state.stats.add("xorb_authorization_headers", 1)
        ranges = xet.parse_ranges(range_header) if range_header else None
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if ranges is not None and len(ranges) > 1:
                return self.send_multipart(f, size, ranges)
            rng = parse_range(range_header, size)
            if self.method == "GET" and rng != "unsatisfiable":
                state.stats.add("xorb_bytes", size if rng is None else rng[1] - rng[0] + 1)
            self.send_file(f, size, {})

    def send_multipart(self, f, size, ranges):
        """206 multipart/byteranges: each range a part with its Content-Range, in the order asked."""
        if any(b >= size for _, b in ranges):
            raise HubError(416, None, "a range ends past the xorb's %d bytes" % size,
                           {"Content-Range": "bytes */%d" % size})
        boundary = "hubfs-%s" % secrets.token_hex(12)
        heads = [("\r\n--%s\r\nContent-Type: application/octet-stream\r\nContent-Range: bytes %d-%d/%d\r\n\r\n"
                  % (boundary, a, b, size)).encode() for a, b in ranges]
        tail = ("\r\n--%s--\r\n" % boundary).encode()
        length = sum(len(h) for h in heads) + sum(b - a + 1 for a, b in ranges) + len(tail)
        headers = {"Content-Type": "multipart/byteranges; boundary=%s" % boundary, "Content-Length": length,
                   "Accept-Ranges": "bytes"}
        self.start_response(206, headers, last_write=self.method == "HEAD")
        if self.method == "HEAD":
            return
        state = self.server.state
        state.stats.add("xorb_bytes", sum(b - a + 1 for a, b in ranges))
        for head, (a, b) in zip(heads, ranges):
            state.stats.add("bytes_sent", len(head))
            self.wfile.write(head)
            if self._copy_body(f, a, b - a + 1) < b - a + 1:
                self.close_connection = True
                return
        state.stats.add("bytes_sent", len(tail))
        self.wfile.write(tail)
