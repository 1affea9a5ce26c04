"""The Xet model (--xet): LFS files stored as Xet, as docs/xet.md and docs/hub-http-contract.md
(section 7b) describe the real service.

  * Storage: each Xet file is packed by hubfs-xet-pack (--xet-pack, built from core/xet: the
    spec's gear-hash chunking, keyed BLAKE3 hashes, xorbs with footers) into a store directory
    (--xet-store, else a temporary one) shared by every file and revision, so a revision that
    changed a few bytes shares all its other chunks' xorbs with the one before.
  * Listings and paths-info carry the file's "xetHash"; its resolve answer (the bridge: a 302 to
    the CDN blob, as before) adds X-Xet-Hash and Link: <token URL>; rel="xet-auth".
  * GET /api/{t}/{org}/{name}/xet-read-token/{rev}: {"casUrl", "accessToken", "exp"} in the body
    and as X-Xet-Cas-Url, X-Xet-Access-Token, X-Xet-Token-Expiration headers.
  * The CAS service lives on the CDN origin: GET /v1/reconstructions/{xetHash} and
    /v2/reconstructions/{xetHash}, Authorization: Bearer <accessToken> (401 without, or with an
    expired or unknown one), an optional Range in file coordinates (416 outside the file).
  * Xorbs: GET /xorbs/default/{xorb hash}?<signature>, no Authorization. Every URL is signed for
    the byte ranges it lists in X-Xet-Signed-Range=bytes=a-b[,c-d...], as the service signs them:
    a V1 fetch_info URL for its url_range (a V1 URL captured from the service carries the
    parameter: xet-core issue 238), a V2 URL for its listed ranges. With --strict-xet-ranges on,
    the Range must be exactly one listed range or exactly the listed set (answered as
    multipart/byteranges); anything else is refused with 403 and counted in /_hubfs/refused-ranges
    (xet-core cas_types: "Client must send exactly the signed range value as the Range header";
    huggingface.js XetBlob.ts: "requesting bytes outside that set fails authorization"). With it
    off, V1 URLs open the whole xorb and V2 ones any Range inside a listed range.

Token and URL signatures rotate with POST /_hubfs/expire, like the CDN's."""

import hashlib
import hmac
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.parse

from .common import HubError

# Files this model never saw are answered 404 by the CAS routes, as an unknown hash is.


class XetStore:
    """Packs files on first use (one hubfs-xet-pack run at a time: the store's index is a file)
    and remembers each file's reconstruction by (path, size, mtime_ns) and by xet hash."""

    def __init__(self, pack_binary, store_dir, max_xorb_bytes=None):
        if not pack_binary or not os.access(pack_binary, os.X_OK):
            raise SystemExit("--xet needs --xet-pack naming the hubfs-xet-pack binary (build it: "
                             "cmake --build build --target hubfs_xet_pack); got %r" % pack_binary)
        self.pack_binary = pack_binary
        # A store the server made for itself is its own to remove when it stops (close()); one
        # named with --xet-store belongs to the caller and is kept.
        self.owns_store_dir = not store_dir
        self.store_dir = store_dir or tempfile.mkdtemp(prefix="hubfs-xet-store-")
        self.max_xorb_bytes = max_xorb_bytes
        self._lock = threading.Lock()
        self._by_file = {}  # (path, size, mtime_ns) -> info
        self._by_hash = {}  # xet hash -> info
        self._xorb_ends = {}  # xorb hash -> (chunk_ends, unpacked_ends)

    def close(self):
        """Removes the store if the server made it (a temporary directory per run)."""
        if self.owns_store_dir:
            shutil.rmtree(self.store_dir, ignore_errors=True)

    def info(self, path, st):
        key = (path, st.st_size, st.st_mtime_ns)
        with self._lock:
            found = self._by_file.get(key)
            if found is not None:
                return found
            cmd = [self.pack_binary, "--store", self.store_dir]
            if self.max_xorb_bytes:
                cmd += ["--max-xorb-bytes", str(self.max_xorb_bytes)]
            run = subprocess.run(cmd + [path], capture_output=True)
            if run.returncode != 0:
                raise HubError(500, None, "xet packing of %s failed: %s" % (path, run.stderr.decode(errors="replace")))
            info = json.loads(run.stdout)
            for xorb, ends in info["xorbs"].items():
                self._xorb_ends[xorb] = (ends["chunk_ends"], ends["unpacked_ends"])
            info["chunks"] = self._chunk_table(info)
            self._by_file[key] = info
            self._by_hash[info["xet_hash"]] = info
            return info

    def _chunk_table(self, info):
        """(file offset, size, xorb, chunk index) of every chunk of the file, in order."""
        out, offset = [], 0
        for term in info["terms"]:
            _, unpacked = self._xorb_ends[term["xorb"]]
            for i in range(term["start"], term["end"]):
                size = unpacked[i] - (unpacked[i - 1] if i > 0 else 0)
                out.append((offset, size, term["xorb"], i))
                offset += size
        if offset != info["size"]:
            raise HubError(500, None, "xet store: the terms of %s add up to %d bytes, not %d"
                           % (info["xet_hash"], offset, info["size"]))
        return out

    def by_hash(self, xet_hash):
        with self._lock:
            return self._by_hash.get(xet_hash)

    def xorb_path(self, xorb):
        if len(xorb) != 64 or any(c not in "0123456789abcdef" for c in xorb):
            return None
        path = os.path.join(self.store_dir, "xorbs", xorb)
        return path if os.path.isfile(path) else None

    def packed_range(self, xorb, start, end):
        """Bytes (first, last inclusive) of chunks [start, end) of a xorb."""
        with self._lock:
            chunk_ends, _ = self._xorb_ends[xorb]
        return (chunk_ends[start - 1] if start > 0 else 0), chunk_ends[end - 1] - 1


class XetAuth:
    """Read tokens and signed xorb URLs: HMACs under a key that POST /_hubfs/expire rotates."""

    def __init__(self, token_ttl, url_ttl, clock=time.time):
        self.token_ttl = token_ttl
        self.url_ttl = url_ttl
        self.clock = clock
        self._key = secrets.token_bytes(32)
        self._lock = threading.Lock()

    def _mac(self, text):
        with self._lock:
            key = self._key
        return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()

    def expire_all(self):
        with self._lock:
            self._key = secrets.token_bytes(32)

    def new_token(self, repo_id):
        exp = int(self.clock()) + self.token_ttl
        # The scope (which repo's files it opens) is not modelled: any live token reads any
        # file the model stores. What the client must get right is when to fetch and refresh it.
        return "xet_%d_%s" % (exp, self._mac("token:%d" % exp)), exp

    def check_token(self, header):
        """None when the Authorization header holds a live token."""
        if not header or not header.startswith("Bearer xet_"):
            return "no Xet read token (Authorization: Bearer <accessToken> from xet-read-token)"
        parts = header[len("Bearer "):].strip().split("_")
        if len(parts) != 3 or not parts[1].isdigit():
            return "malformed Xet token"
        exp = int(parts[1])
        if not hmac.compare_digest(self._mac("token:%d" % exp), parts[2]):
            return "Xet token not valid (unknown, or rotated by /_hubfs/expire)"
        if exp <= self.clock():
            return "Xet token expired"
        return None

    def xorb_query(self, xorb, ranges=None):
        """A signed xorb URL's query. With ranges [(a, b)] it is signed for exactly those bytes
        and lists them as the service does, X-Xet-Signed-Range=bytes=a-b[,c-d...]; without, for
        the whole xorb (the model's old V1 URLs, which --strict-xet-ranges off still hands out)."""
        exp = int(self.clock()) + self.url_ttl + 1
        spec = format_ranges(ranges) if ranges else ""
        q = [("expires", str(exp))]
        if spec:
            q.append((SIGNED_RANGE_PARAM, spec))
        q.append(("sig", self._mac("xorb:%s:%d:%s" % (xorb, exp, spec))))
        return urllib.parse.urlencode(q)

    def check_xorb(self, xorb, query, range_header, strict):
        """(None, None) when the request may have the xorb's bytes; else (why, refused_range):
        refused_range is True when the signature holds but the Range is not one the URL signs.
        Strict (the service, issue 39): the Range must be exactly one of the URL's listed ranges
        or exactly the listed set; not strict: any Range inside one listed range, any at all on
        a URL that lists none."""
        first = lambda k: (query.get(k) or [None])[0]  # noqa: E731
        try:
            exp = int(first("expires") or "")
        except ValueError:
            return "missing or malformed expires", False
        spec = first(SIGNED_RANGE_PARAM) or ""
        sig = first("sig")
        if not sig or not hmac.compare_digest(self._mac("xorb:%s:%d:%s" % (xorb, exp, spec)), sig):
            return "signature does not match", False
        if exp <= self.clock():
            return "Request has expired", False
        if not spec:
            return None, None
        signed = parse_ranges(spec)
        if strict:
            asked = parse_ranges((range_header or "").strip())
            if asked is not None and (asked == signed or (len(asked) == 1 and asked[0] in signed)):
                return None, None
            return ("this URL is signed for exactly %s: the Range must be one of those ranges or all of them, "
                    "as listed; got %r" % (spec, range_header)), True
        asked = parse_simple_range(range_header)
        if asked is None or not any(a <= asked[0] and asked[1] <= b for a, b in signed):
            return "this URL is signed for bytes %s only; Range %r is outside them" % (spec, range_header), True
        return None, None


# The query parameter naming the bytes a xorb URL is signed for, as the service spells it (a V1
# URL captured in April 2025 carries X-Xet-Signed-Range=bytes%3D0-57252804: xet-core issue 238;
# huggingface.js XetBlob.ts names it for V2).
SIGNED_RANGE_PARAM = "X-Xet-Signed-Range"


def format_ranges(ranges):
    """'bytes=a-b,c-d' for [(a, b), (c, d)] (inclusive ends)."""
    return "bytes=" + ",".join("%d-%d" % r for r in ranges)


def parse_ranges(header):
    """[(first, last), ...] of a 'bytes=a-b[,c-d...]' header with only closed ranges, in the
    order given; None for anything else (suffix or open ranges, another unit, garbage)."""
    unit, sep, spec = (header or "").partition("=")
    if not sep or unit.strip().lower() != "bytes":
        return None
    out = []
    for part in spec.split(","):
        first, dash, last = part.strip().partition("-")
        if not dash or not first.isdigit() or not last.isdigit():
            return None
        a, b = int(first), int(last)
        if b < a:
            return None
        out.append((a, b))
    return out


def parse_simple_range(header):
    """(first, last) of a 'bytes=a-b' header, else None."""
    ranges = parse_ranges(header)
    return ranges[0] if ranges is not None and len(ranges) == 1 else None


def reconstruction(store, auth, info, cdn_url, version, range_header, sign_v1_ranges):
    """The V1 or V2 answer for the file's bytes the Range asks (all of them without one).
    sign_v1_ranges: each V1 fetch_info URL is signed for its url_range, as the service signs
    them (xet-core issue 238); else for the whole xorb."""
    size = info["size"]
    chunks = info["chunks"]
    if range_header:
        unit, _, spec = range_header.strip().partition("=")
        first, sep, last = spec.partition("-")
        try:
            a = int(first)
            b = int(last) if last else size - 1
        except ValueError:
            raise HubError(400, None, "bad Range %r" % range_header)
        if unit.strip().lower() != "bytes" or not sep or a < 0 or b < a or a >= size:
            raise HubError(416, None, "Range %r is outside the file's %d bytes" % (range_header, size),
                           {"Content-Range": "bytes */%d" % size})
        b = min(b, size - 1)
    else:
        a, b = 0, size - 1
    if size == 0:
        return {"offset_into_first_range": 0, "terms": [], ("fetch_info" if version == 1 else "xorbs"): {}}
    # Chunks holding a..b: a binary search for the first, then walk.
    lo, hi = 0, len(chunks) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if chunks[mid][0] <= a:
            lo = mid
        else:
            hi = mid - 1
    first_chunk = lo
    terms = []
    k = first_chunk
    while k < len(chunks) and chunks[k][0] <= b:
        offset, csize, xorb, idx = chunks[k]
        t = terms[-1] if terms else None
        if t is not None and t["hash"] == xorb and t["range"]["end"] == idx:
            t["range"]["end"] += 1
            t["unpacked_length"] += csize
        else:
            terms.append({"hash": xorb, "unpacked_length": csize, "range": {"start": idx, "end": idx + 1}})
        k += 1
    answer = {"offset_into_first_range": a - chunks[first_chunk][0], "terms": terms}
    if version == 1:
        fetch_info = {}
        for t in terms:
            r = (t["range"]["start"], t["range"]["end"])
            entries = fetch_info.setdefault(t["hash"], [])
            if any(e["range"]["start"] == r[0] and e["range"]["end"] == r[1] for e in entries):
                continue
            first_byte, last_byte = store.packed_range(t["hash"], r[0], r[1])
            query = auth.xorb_query(t["hash"], [(first_byte, last_byte)] if sign_v1_ranges else None)
            entries.append({"range": {"start": r[0], "end": r[1]},
                            "url": "%s/xorbs/default/%s?%s" % (cdn_url, t["hash"], query),
                            "url_range": {"start": first_byte, "end": last_byte}})
        answer["fetch_info"] = fetch_info
        return answer
    # V2: per xorb, its terms' chunk ranges merged (sorted, overlapping or touching ones joined),
    # one URL signed for exactly their bytes.
    by_xorb = {}
    for t in terms:
        by_xorb.setdefault(t["hash"], []).append((t["range"]["start"], t["range"]["end"]))
    xorbs = {}
    for xorb, ranges in by_xorb.items():
        merged = []
        for s, e in sorted(ranges):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        byte_ranges = [store.packed_range(xorb, s, e) for s, e in merged]
        xorbs[xorb] = [{"url": "%s/xorbs/default/%s?%s" % (cdn_url, xorb, auth.xorb_query(xorb, byte_ranges)),
                        "ranges": [{"chunks": {"start": s, "end": e}, "bytes": {"start": br[0], "end": br[1]}}
                                   for (s, e), br in zip(merged, byte_ranges)]}]
    answer["xorbs"] = xorbs
    return answer
