"""The CDN origin: GET|HEAD /blobs/{sha256}?<signature>, serving a blob resolve registered,
once its signature and expiry check out (any of the --url-style spellings, signing.py)."""

import os

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
                                               self.headers.get("Range")))

    def handle_xorb(self, xorb):
        """A xorb's bytes from a signed URL (no Authorization expected)."""
        state = self.server.state
        if self.method not in ("GET", "HEAD"):
            raise HubError(405, None, "xorbs are GET/HEAD only")
        why = state.xet_auth.check_xorb(xorb, self.query, self.headers.get("Range"))
        if why is not None:
            raise HubError(403, "AccessDenied", why)
        path = state.xet.xorb_path(xorb)
        if path is None:
            raise HubError(404, "NoSuchKey", "no xorb %s" % xorb)
        state.stats.add("xorb_requests", 1)
        if self.headers.get("Authorization") is not None:
            state.stats.add("xorb_authorization_headers", 1)
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            rng = parse_range(self.headers.get("Range"), size)
            if self.method == "GET" and rng != "unsatisfiable":
                state.stats.add("xorb_bytes", size if rng is None else rng[1] - rng[0] + 1)
            self.send_file(f, size, {})
