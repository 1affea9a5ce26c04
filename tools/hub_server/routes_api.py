"""The Hub API origin: routing (API, resolve, and the plain view), repo access (tokens, private,
gated, renamed repos), repo info, paged tree listing, paths-info, and resolve (small files
inline, LFS files a 302 to a signed CDN URL)."""

import base64
import hashlib
import json
import os
import urllib.parse

from . import listed_sizes
from .common import PLAIN_PREFIX, HubError
from .store import LFS_POINTER_TEMPLATE, REPO_TYPES, walk_entries


class ApiRoutes:
    """Handler mixin for the API origin; open_repo and open_revision serve the plain view too."""

    def handle_api(self):
        segs = [urllib.parse.unquote(s) for s in self.raw_path.split("/")[1:]]
        if segs and segs[0] == PLAIN_PREFIX.strip("/"):
            return self.handle_plain(segs[1:])
        if segs and segs[-1] == "" and len(segs) > 1:
            segs = segs[:-1]  # tolerate one trailing slash
        if len(segs) >= 7 and segs[:2] == ["api", "resolve-chain"] and segs[2] in REPO_TYPES:
            return self.handle_resolve(segs[2], segs[3], segs[4], segs[5:], from_chain=True)
        if len(segs) >= 7 and segs[:2] == ["api", "resolve-cache"] and segs[2] in REPO_TYPES:
            return self.handle_resolve(segs[2], segs[3], segs[4], segs[5:], from_cache=True)
        if len(segs) >= 4 and segs[0] == "api" and segs[1] in REPO_TYPES:
            return self.handle_repo_api(segs[1], segs[2], segs[3], segs[4:])
        if len(segs) >= 5 and segs[0] in ("datasets", "spaces") and segs[3] == "resolve":
            return self.handle_resolve(segs[0], segs[1], segs[2], segs[4:])
        if len(segs) >= 4 and segs[2] == "resolve":
            return self.handle_resolve("models", segs[0], segs[1], segs[3:])
        if len(segs) >= 5 and segs[0] in ("datasets", "spaces") and segs[3] == "raw":
            return self.handle_raw(segs[0], segs[1], segs[2], segs[4:])
        if len(segs) >= 4 and segs[2] == "raw":
            return self.handle_raw("models", segs[0], segs[1], segs[3:])
        raise HubError(404, None, "no such endpoint: %s %s" % (self.method, self.raw_path))

    # Files of a gated repo anyone may read (the Hub shows it on the repo page before access is
    # granted): the model card only. The live Hub gates .gitattributes too (401 without a token on
    # a gated model; docs/hub-http-contract.md).
    GATED_PUBLIC_FILES = ("README.md",)

    def caller_token(self):
        """The bearer token sent, or None. A token the Hub does not know is refused with 401
        "Invalid credentials in Authorization header" on every request, public repos included,
        as the real Hub does (--token and --token-no-access name the known ones)."""
        state = self.server.state
        auth = self.headers.get("Authorization")
        if not auth or not auth.startswith("Bearer "):
            return None
        token = auth[len("Bearer "):].strip()
        if token not in state.tokens and token not in state.tokens_no_access:
            raise HubError(401, None, "Invalid credentials in Authorization header")
        return token

    def open_repo(self, rtype, org, name):
        """The repo, once the caller may see it; else the Hub's error. A gated repo is visible
        to anyone (info, listing, paths-info): its files are checked by check_gated_file."""
        state = self.server.state
        token = self.caller_token()
        repo = state.store.find(rtype, org, name)
        if repo is not None and repo.moved_to:
            raise HubError(307, None, "%s was renamed to %s" % (repo.id, repo.moved_to),
                           {"Location": self._moved_location(org, name, repo.moved_to)})
        allowed = token is not None and token in state.tokens
        if repo is None or (repo.private and not allowed):
            # A private repo the caller may not see looks missing, as on the Hub; only asking
            # without any token gets 401 (the hint to log in).
            status = 401 if repo is not None and token is None else 404
            raise HubError(status, "RepoNotFound", "Repository Not Found for url: %s" % self.path)
        repo.caller_allowed = allowed
        return repo

    def check_gated_file(self, repo, rtype, rel):
        """A gated repo's file other than its card: 401 without a token, 403 with a token that
        was not granted access, both X-Error-Code: GatedRepo, the message naming the repo page."""
        if not repo.gated or repo.caller_allowed or rel in self.GATED_PUBLIC_FILES:
            return
        page = "%s/%s%s" % (self.server.state.api_url, "" if rtype == "models" else rtype + "/", repo.id)
        if self.headers.get("Authorization") is None:
            raise HubError(401, "GatedRepo", "Access to %s %s is restricted. You must have access to it and be "
                           "authenticated to access it. Please log in." % (rtype[:-1], repo.id))
        raise HubError(403, "GatedRepo", "Access to %s %s is restricted and you are not in the authorized list. "
                       "Visit %s to ask for access." % (rtype[:-1], repo.id, page))

    def _moved_location(self, org, name, new_id):
        """This request's path with the old repo id swapped for the new one: a relative
        Location, as the Hub sends for renamed repos."""
        segs = self.raw_path.split("/")
        old = [urllib.parse.quote(org), urllib.parse.quote(name)]
        i = next(i for i in range(len(segs) - 1) if segs[i:i + 2] == old)
        segs[i:i + 2] = [urllib.parse.quote(p) for p in new_id.split("/")]
        query = urllib.parse.urlsplit(self.path).query
        return "/".join(segs) + ("?" + query if query else "")

    def open_revision(self, repo, rev, refresh=False):
        # "HEAD" is the default branch (huggingface.js modelInfo asks /revision/HEAD).
        commit = repo.resolve_revision("main" if rev == "HEAD" else rev, refresh)
        if commit is None:
            raise HubError(404, "RevisionNotFound", "Invalid rev id: %s" % rev)
        return commit

    def handle_repo_api(self, rtype, org, name, rest):
        if not rest or (rest[0] == "revision" and len(rest) == 2):
            if self.method not in ("GET", "HEAD"):
                raise HubError(405, None, "repo info is GET only")
            repo = self.open_repo(rtype, org, name)
            commit = self.open_revision(repo, rest[1] if rest else "main", refresh=True)
            return self.send_json(200, self.repo_info(repo, commit))
        if rest[0] == "tree" and len(rest) >= 2:
            if self.method not in ("GET", "HEAD"):
                raise HubError(405, None, "tree listing is GET only")
            repo = self.open_repo(rtype, org, name)
            commit = self.open_revision(repo, rest[1])
            return self.list_tree(commit, "/".join(rest[2:]), repo)
        if rest[0] == "paths-info" and len(rest) == 2:
            if self.method != "POST":
                raise HubError(405, None, "paths-info is POST only")
            repo = self.open_repo(rtype, org, name)
            commit = self.open_revision(repo, rest[1])
            return self.paths_info(commit, repo)
        if rest[0] == "xet-read-token" and len(rest) == 2 and self.server.state.xet is not None:
            if self.method != "GET":
                raise HubError(405, None, "xet-read-token is GET only")
            repo = self.open_repo(rtype, org, name)
            commit = self.open_revision(repo, rest[1])
            return self.xet_read_token(repo, rtype, commit)
        raise HubError(404, None, "no such endpoint: %s %s" % (self.method, self.raw_path))

    def xet_read_token(self, repo, rtype, commit):
        """A read token for the CAS service (xet.py), in the body as huggingface.js reads it and
        in the headers as huggingface_hub reads them. A gated repo's token needs access."""
        state = self.server.state
        self.check_gated_file(repo, rtype, "")
        state.stats.add("xet_token_requests", 1)
        token, exp = state.xet_auth.new_token(repo.id)
        self.send_json(200, {"accessToken": token, "exp": exp, "casUrl": state.cdn_url}, {
            "X-Xet-Cas-Url": state.cdn_url,
            "X-Xet-Access-Token": token,
            "X-Xet-Token-Expiration": str(exp),
            "X-Repo-Commit": commit.sha,
        })

    def repo_info(self, repo, commit):
        info = {
            # The Hub's database id (24 hex digits), which huggingface.js modelInfo returns as
            # `id`; stable per repo here.
            "_id": hashlib.sha1(("%s:%s" % (repo.rtype, repo.id)).encode()).hexdigest()[:24],
            "id": repo.id,
            "sha": commit.sha,
            "lastModified": commit.date,
            "private": repo.private,
            "gated": repo.gated,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "siblings": [{"rfilename": rel} for rel in repo.siblings(commit)],
        }
        if repo.rtype == "models":
            info["modelId"] = repo.id
        return info

    def list_tree(self, commit, rel, repo):
        state = self.server.state
        found = state.store.stat_path(commit, rel)
        commit_header = {"X-Repo-Commit": commit.sha}
        if found is None or not found[1]:
            raise HubError(404, "EntryNotFound", "%s does not exist at revision %s" % (rel or "/", commit.sha),
                           commit_header)
        recursive = self.query.get("recursive", ["false"])[0].lower() in ("1", "true")
        try:
            limit = int(self.query.get("limit", [state.page_size])[0])
            offset = decode_cursor(self.query["cursor"][0]) if "cursor" in self.query else 0
        except ValueError as e:
            raise HubError(400, None, "bad limit or cursor: %s" % e)
        page_size = max(1, min(limit, state.page_size))
        prefix = rel + "/" if rel else ""
        # Listing names and stats is cheap; digests are computed only for the page we return.
        all_entries = list(walk_entries(found[0], prefix, recursive))
        page = all_entries[offset:offset + page_size]
        body = listed_sizes.apply(repo, [state.store.entry(commit, r, d, st) for r, d, st in page])
        headers = dict(commit_header)
        if offset + page_size < len(all_entries):
            query = {k: v[0] for k, v in self.query.items() if k != "cursor"}
            query["cursor"] = encode_cursor(offset + page_size)
            headers["Link"] = '<%s%s?%s>; rel="next"' % (state.api_url, self.raw_path,
                                                          urllib.parse.urlencode(query))
        self.send_json(200, body, headers)

    def paths_info(self, commit, repo):
        store = self.server.state.store
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        try:
            if ctype == "application/json":
                paths = json.loads(self.body or b"{}").get("paths", [])
            else:
                paths = urllib.parse.parse_qs(self.body.decode(), keep_blank_values=True).get("paths", [])
        except (ValueError, AttributeError, UnicodeDecodeError) as e:
            raise HubError(400, None, "bad paths-info body: %s" % e)
        out, seen = [], set()
        for p in paths:
            p = str(p).strip("/")
            if p in seen or p == "":
                continue
            seen.add(p)
            found = store.stat_path(commit, p)
            if found is not None:
                out.append(store.entry(commit, p, found[1], found[2]))
        self.send_json(200, listed_sizes.apply(repo, out), {"X-Repo-Commit": commit.sha})

    def open_file(self, route, rtype, org, name, rest):
        """What resolve and raw share: GET/HEAD only, the repo, the revision (rest[0]) and the file
        (rest[1:]) with its gate checked; returns (repo, commit, rel, path, st, oid, lfs)."""
        if self.method not in ("GET", "HEAD"):
            raise HubError(405, None, "%s is GET/HEAD only" % route)
        store = self.server.state.store
        repo = self.open_repo(rtype, org, name)
        if len(rest) < 2:
            raise HubError(404, "EntryNotFound", "%s needs a revision and a path" % route)
        commit = self.open_revision(repo, rest[0])
        rel = "/".join(rest[1:])
        found = store.stat_path(commit, rel)
        if found is None or found[1]:
            raise HubError(404, "EntryNotFound", "%s does not exist at revision %s" % (rel, commit.sha),
                           {"X-Repo-Commit": commit.sha})
        self.check_gated_file(repo, rtype, rel)
        path, _, st = found
        oid, lfs = store.file_identity(path, rel, st)
        return repo, commit, rel, path, st, oid, lfs

    def handle_resolve(self, rtype, org, name, rest, from_chain=False, from_cache=False):
        state = self.server.state
        repo, commit, rel, path, st, oid, lfs = self.open_file("resolve", rtype, org, name, rest)
        if lfs is None and state.resolve_cache and not from_cache:
            # The Hub answers a small file's resolve with a 307 to a relative /api/resolve-cache/
            # URL naming the commit, the original path and the ETag (captured headers:
            # huggingface/swift-transformers PR 209); that URL then answers the bytes.
            prefix = "" if rtype == "models" else rtype + "/"
            original = "/%s%s/resolve/%s/%s" % (prefix, repo.id, rest[0], rel)
            hop = "/api/resolve-cache/%s/%s/%s/%s/%s?%s=&etag=%s" % (
                rtype, urllib.parse.quote(org), urllib.parse.quote(name), commit.sha, urllib.parse.quote(rel),
                urllib.parse.quote(original, safe=""), urllib.parse.quote('"%s"' % oid, safe=""))
            return self.send_bytes(307, b"", {"Location": hop, "X-Repo-Commit": commit.sha, "ETag": '"%s"' % oid,
                                              "Accept-Ranges": "bytes"})
        if lfs is None:
            with open(path, "rb") as f:
                self.send_file(f, os.fstat(f.fileno()).st_size,
                               {"ETag": '"%s"' % oid, "X-Repo-Commit": commit.sha})
            return
        if state.redirect_chain and not from_chain:
            # The first of two hops: a relative redirect on the Hub itself (as for a renamed
            # repo), which then redirects to the CDN.
            hop = "/api/resolve-chain/%s/%s/%s/%s/%s" % (rtype, urllib.parse.quote(org), urllib.parse.quote(name),
                                                      commit.sha, urllib.parse.quote(rel))
            return self.send_bytes(307, b"", {"Location": hop, "X-Repo-Commit": commit.sha})
        sha256 = lfs["oid"]
        state.blobs.register(sha256, path, st)
        location = "%s/blobs/%s?%s" % (state.cdn_url, sha256, state.signer.signed_query(sha256))
        headers = {
            "Location": location,
            "X-Repo-Commit": commit.sha,
            "X-Linked-Size": st.st_size,
            "X-Linked-Etag": '"%s"' % sha256,
            "ETag": '"%s"' % sha256,
        }
        if state.xet is not None:
            # Xet storage: the bridge URL as before, plus the file's hash and where its read token
            # comes from (huggingface_hub's parse_xet_file_data_from_response reads both).
            xet_hash = state.xet.info(path, st)["xet_hash"]
            headers["X-Xet-Hash"] = xet_hash
            headers["Link"] = '<%s/api/%s/%s/xet-read-token/%s>; rel="xet-auth"' % (
                state.api_url, rtype, repo.id, commit.sha)
            if "application/vnd.xet-fileinfo+json" in (self.headers.get("Accept") or ""):
                # A client that can read Xet asks for the file's Xet description instead of the
                # bridge: 200, no redirect, the size and hash in headers and the V1 reconstruction
                # URL as a link (huggingface.js file-download-info.ts reads exactly these).
                del headers["Location"]
                headers["Link"] += ', <%s/v1/reconstructions/%s>; rel="xet-reconstruction-info"' % (
                    state.cdn_url, xet_hash)
                info = {"hash": xet_hash, "refreshUrl": "%s/api/%s/%s/xet-read-token/%s" % (
                    state.api_url, rtype, repo.id, commit.sha), "reconstructionUrl": "%s/v1/reconstructions/%s" % (
                    state.cdn_url, xet_hash), "etag": sha256, "size": st.st_size}
                return self.send_bytes(200, json.dumps(info).encode(), headers,
                                       content_type="application/vnd.xet-fileinfo+json")
        self.send_bytes(302, b"", headers)

    def handle_raw(self, rtype, org, name, rest):
        """GET|HEAD /{prefix}{id}/raw/{rev}/{path}: the file as git stores it, so an LFS (or Xet)
        file's pointer, never a redirect (huggingface.js fileExists asks HEAD here)."""
        _, commit, _, path, _, oid, lfs = self.open_file("raw", rtype, org, name, rest)
        headers = {"ETag": '"%s"' % oid, "X-Repo-Commit": commit.sha}
        if lfs is None:
            with open(path, "rb") as f:
                return self.send_file(f, os.fstat(f.fileno()).st_size, headers)
        pointer = LFS_POINTER_TEMPLATE.format(oid=lfs["oid"], size=lfs["size"]).encode()
        self.send_bytes(200, pointer, headers, content_type="text/plain; charset=utf-8")


def encode_cursor(offset):
    return base64.urlsafe_b64encode(("o:%d" % offset).encode()).decode().rstrip("=")


def decode_cursor(cursor):
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        raise ValueError("cursor is not one of ours")
    if not raw.startswith("o:") or not raw[2:].isdigit():
        raise ValueError("cursor is not one of ours")
    return int(raw[2:])
