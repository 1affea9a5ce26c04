"""The CDN origin: GET|HEAD /blobs/{sha256}?<signature>, serving a blob resolve registered,
once its signature and expiry check out (any of the --url-style spellings, signing.py)."""

import os

from .common import HubError


class CdnRoutes:
    """Handler mixin for the CDN origin."""

    def handle_cdn(self):
        state = self.server.state
        parts = self.raw_path.split("/")
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
