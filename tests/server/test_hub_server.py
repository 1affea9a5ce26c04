#!/usr/bin/python3
"""Self-test of tools/hub_server.py, the local Hub the C++ tests and benchmarks run against.

Run: /usr/bin/python3 tests/server/test_hub_server.py [-v]   (exits non-zero on failure)
Standard library only; every server it starts is on ephemeral ports and killed at the end.
"""

import email.utils
import hashlib
import html.parser
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "hub_server.py")
TOKEN = "hf_test_token"
# A token the server knows that opens no private or gated repo (an account without access).
TOKEN_NO_ACCESS = "hf_no_access_token"
# Tiny pages so every listing in these tests spans several of them.
PAGE_SIZE = 2
# Enough latency to measure reliably on a loaded 2-core machine, little enough to stay fast.
LATENCY_MS = 200
BIG = bytes((i * 7 + i // 251) % 256 for i in range(200_000))  # LFS by size (>= 10240)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def build_root(root):
    plain = os.path.join(root, "models", "org", "plain")
    write(os.path.join(plain, "README.md"), "# hello\n")
    write(os.path.join(plain, "config.json"), '{"a": 1}\n')
    write(os.path.join(plain, "sub", "deep", "x.txt"), "x" * 100)
    write(os.path.join(plain, "sub", "y.txt"), "y")
    write(os.path.join(plain, "weights.bin"), b"\x01\x02\x03")  # LFS by extension
    write(os.path.join(plain, "big.dat"), BIG)
    for i in range(5):
        write(os.path.join(plain, "many", "f%d.txt" % i), "file %d" % i)

    versioned = os.path.join(root, "datasets", "org", "versioned")
    write(os.path.join(versioned, "hub.json"), json.dumps({
        "refs": {"main": "c2", "v1": "c1", "refs/pr/1": "c1"},
        "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}, "c2": {"date": "2024-02-01T00:00:00Z"}},
    }))
    write(os.path.join(versioned, "snapshots", "c1", "a.txt"), "one")
    write(os.path.join(versioned, "snapshots", "c2", "a.txt"), "two")
    write(os.path.join(versioned, "snapshots", "c2", "b.txt"), "bee")

    # Names a web page must escape, for the plain view's index.
    web = os.path.join(root, "datasets", "org", "web")
    write(os.path.join(web, "a b&c<d>.txt"), "odd")
    write(os.path.join(web, "dir one", "x.txt"), "x")

    write(os.path.join(root, "models", "org", "old-name", "hub.json"), json.dumps({"moved_to": "org/plain"}))

    for name, cfg in (("private", {"private": True}), ("gated", {"gated": "manual"})):
        repo = os.path.join(root, "models", "org", name)
        write(os.path.join(repo, "hub.json"), json.dumps(dict(cfg, refs={"main": "c1"}, commits={"c1": {}})))
        write(os.path.join(repo, "snapshots", "c1", "secret.txt"), "s3cret")
        write(os.path.join(repo, "snapshots", "c1", "README.md"), "# %s\n" % name)
        write(os.path.join(repo, "snapshots", "c1", ".gitattributes"), "*.bin filter=lfs\n")


class Server:
    def __init__(self, root, *args, env=None):
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", SERVER, "--root", root] + list(args),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        line = self.proc.stdout.readline().decode()
        words = line.split()
        if len(words) != 4 or words[0] != "listening" or words[2] != "cdn":
            self.proc.kill()
            raise RuntimeError("server did not start: %r %s" % (line, self.proc.stderr.read().decode()))
        self.url, self.cdn = words[1], words[3]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.proc.stdin.close()


class LinkParser(html.parser.HTMLParser):
    """The href of every <a> in a page, as rclone's http backend reads an index."""

    def __init__(self):
        super().__init__()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href"]


def links(body):
    parser = LinkParser()
    parser.feed(body.decode())
    return sorted(parser.hrefs)


class Reply:
    def __init__(self, resp, body):
        self.status = resp.status
        self.headers = resp.headers
        self.body = body

    def json(self):
        return json.loads(self.body)


def request(url, method="GET", headers=None, body=None, conn=None):
    """One request, no redirect following (the 302 is what we test)."""
    u = urllib.parse.urlsplit(url)
    own = conn is None
    conn = conn or http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.request(method, u.path + ("?" + u.query if u.query else ""), body=body, headers=headers or {})
        resp = conn.getresponse()
        return Reply(resp, resp.read())
    finally:
        if own:
            conn.close()


def sha1_commit(repo_id, name):
    return hashlib.sha1(("%s:%s" % (repo_id, name)).encode()).hexdigest()


class HubServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="hub-server-test-")
        build_root(cls.root)
        cls.hub = Server(cls.root, "--page-size", str(PAGE_SIZE), "--token", TOKEN,
                         "--token-no-access", TOKEN_NO_ACCESS)

    @classmethod
    def tearDownClass(cls):
        cls.hub.stop()
        shutil.rmtree(cls.root, ignore_errors=True)

    def setUp(self):
        request(self.hub.url + "/_hubfs/faults", "DELETE")
        request(self.hub.url + "/_hubfs/reset", "POST")

    def api(self, path, **kw):
        return request(self.hub.url + path, **kw)

    def stats(self):
        return self.api("/_hubfs/stats").json()

    def list_all(self, path):
        """Follows Link rel=next to the end; returns (entries, pages)."""
        url, entries, pages = self.hub.url + path, [], 0
        while url:
            r = request(url)
            self.assertEqual(r.status, 200, r.body)
            entries += r.json()
            pages += 1
            link = r.headers.get("Link")
            url = link[link.index("<") + 1:link.index(">")] if link else None
            if link:
                self.assertTrue(link.endswith('; rel="next"'))
                self.assertTrue(url.startswith(self.hub.url))
        return entries, pages

    def assertHubError(self, r, status, code):
        self.assertEqual(r.status, status, r.body)
        self.assertEqual(r.headers.get("X-Error-Code"), code)
        self.assertTrue(r.headers.get("X-Error-Message"))
        self.assertIn("error", r.json())

    # --- repo info and revisions ------------------------------------------------------------

    def test_repo_info_plain(self):
        r = self.api("/api/models/org/plain")
        self.assertEqual(r.status, 200)
        info = r.json()
        self.assertEqual(info["id"], "org/plain")
        self.assertRegex(info["sha"], "^[0-9a-f]{40}$")
        self.assertFalse(info["private"])
        self.assertFalse(info["gated"])
        self.assertIn("sub/deep/x.txt", {s["rfilename"] for s in info["siblings"]})
        self.assertEqual(len(info["siblings"]), 11)
        pinned = self.api("/api/models/org/plain/revision/" + info["sha"]).json()
        self.assertEqual(pinned["sha"], info["sha"])

    def test_revisions_from_hub_json(self):
        main = self.api("/api/datasets/org/versioned").json()
        self.assertEqual(main["sha"], sha1_commit("org/versioned", "c2"))
        self.assertEqual(main["lastModified"], "2024-02-01T00:00:00Z")
        self.assertEqual({s["rfilename"] for s in main["siblings"]}, {"a.txt", "b.txt"})
        c1 = sha1_commit("org/versioned", "c1")
        for rev in ("v1", "refs%2Fpr%2F1", c1):
            self.assertEqual(self.api("/api/datasets/org/versioned/revision/" + rev).json()["sha"], c1, rev)
        self.assertEqual(self.api("/datasets/org/versioned/resolve/v1/a.txt").body, b"one")
        self.assertEqual(self.api("/datasets/org/versioned/resolve/refs%2Fpr%2F1/a.txt").body, b"one")
        self.assertEqual(self.api("/datasets/org/versioned/resolve/main/a.txt").body, b"two")
        self.assertHubError(self.api("/datasets/org/versioned/resolve/v1/b.txt"), 404, "EntryNotFound")

    def test_plain_repo_sha_follows_content(self):
        repo = os.path.join(self.root, "models", "org", "mutable")
        write(os.path.join(repo, "f.txt"), "v1")
        before = self.api("/api/models/org/mutable").json()["sha"]
        self.assertEqual(self.api("/api/models/org/mutable").json()["sha"], before)
        write(os.path.join(repo, "f.txt"), "v2 longer")
        after = self.api("/api/models/org/mutable").json()["sha"]
        self.assertNotEqual(before, after)
        self.assertHubError(self.api("/org/mutable/resolve/%s/f.txt" % before), 404, "RevisionNotFound")
        self.assertEqual(self.api("/org/mutable/resolve/%s/f.txt" % after).body, b"v2 longer")

    # --- listing ----------------------------------------------------------------------------

    def test_tree_one_directory_paginated(self):
        entries, pages = self.list_all("/api/models/org/plain/tree/main?recursive=false")
        self.assertEqual(pages, 3)  # 6 entries, 2 per page
        by_path = {e["path"]: e for e in entries}
        # Directories appear as entries; their contents do not.
        self.assertEqual(set(by_path), {"README.md", "config.json", "sub", "weights.bin", "big.dat", "many"})
        readme = by_path["README.md"]
        self.assertEqual(readme["type"], "file")
        self.assertEqual(readme["size"], 8)
        self.assertEqual(readme["oid"], hashlib.sha1(b"blob 8\0# hello\n").hexdigest())
        self.assertNotIn("lfs", readme)
        self.assertEqual(by_path["sub"]["type"], "directory")
        big = by_path["big.dat"]["lfs"]
        self.assertEqual(big["oid"], hashlib.sha256(BIG).hexdigest())
        self.assertEqual(big["size"], len(BIG))
        self.assertGreater(big["pointerSize"], 100)
        self.assertIn("lfs", by_path["weights.bin"])  # LFS by extension despite 3 bytes

    def test_listed_sizes_put_hostile_sizes_in_listings(self):
        repo = os.path.join(self.root, "models", "org", "hostile")
        write(os.path.join(repo, "snapshots", "c1", "w.bin"), "twelve bytes")
        write(os.path.join(repo, "snapshots", "c1", "a.txt"), "a")
        write(os.path.join(repo, "hub.json"), json.dumps({
            "refs": {"main": "c1"}, "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}},
            "listed_sizes": {"w.bin": 2 ** 63 - 1, "a.txt": "12"}}))
        tree = self.api("/api/models/org/hostile/tree/main")
        self.assertEqual(tree.status, 200, tree.body)
        self.assertIn(b"9223372036854775807", tree.body)  # an exact integer, as a hostile Hub sends it
        by_path = {e["path"]: e for e in tree.json()}
        self.assertEqual(by_path["w.bin"]["size"], 2 ** 63 - 1)
        self.assertEqual(by_path["w.bin"]["lfs"]["size"], 2 ** 63 - 1)
        self.assertEqual(by_path["a.txt"]["size"], "12")
        info = self.api("/api/models/org/hostile/paths-info/main", method="POST", body=b"paths=w.bin",
                        headers={"Content-Type": "application/x-www-form-urlencoded"}).json()
        self.assertEqual(info[0]["lfs"]["size"], 2 ** 63 - 1)
        # The bytes are the file's own.
        self.assertEqual(self.api("/org/hostile/resolve/main/a.txt").body, b"a")
        # Other repos' listings are untouched.
        plain, _ = self.list_all("/api/models/org/plain/tree/main")
        self.assertTrue(all(isinstance(e["size"], int) and e["size"] >= 0 for e in plain))

    def test_tree_subdir_recursive_and_limit(self):
        entries, _ = self.list_all("/api/models/org/plain/tree/main/sub")
        self.assertEqual({e["path"] for e in entries}, {"sub/deep", "sub/y.txt"})
        entries, _ = self.list_all("/api/models/org/plain/tree/main/sub?recursive=true")
        self.assertEqual({e["path"] for e in entries}, {"sub/deep", "sub/deep/x.txt", "sub/y.txt"})
        entries, pages = self.list_all("/api/models/org/plain/tree/main/many?limit=1")
        self.assertEqual((len(entries), pages), (5, 5))
        self.assertHubError(self.api("/api/models/org/plain/tree/main/nope"), 404, "EntryNotFound")
        self.assertHubError(self.api("/api/models/org/plain/tree/main/README.md"), 404, "EntryNotFound")
        self.assertEqual(self.api("/api/models/org/plain/tree/main?cursor=garbage!").status, 400)

    def test_paths_info(self):
        r = self.api("/api/models/org/plain/paths-info/main", method="POST",
                     body="paths=README.md&paths=nope.txt&paths=sub&paths=big.dat",
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(r.status, 200, r.body)
        got = {e["path"]: e for e in r.json()}
        self.assertEqual(set(got), {"README.md", "sub", "big.dat"})
        self.assertEqual(got["sub"]["type"], "directory")
        self.assertEqual(got["big.dat"]["lfs"]["oid"], hashlib.sha256(BIG).hexdigest())

    # --- content ----------------------------------------------------------------------------

    def test_resolve_small_file_and_ranges(self):
        sha = self.api("/api/models/org/plain").json()["sha"]
        r = self.api("/org/plain/resolve/main/sub/deep/x.txt")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"x" * 100)
        self.assertEqual(r.headers["ETag"], '"%s"' % hashlib.sha1(b"blob 100\0" + b"x" * 100).hexdigest())
        self.assertEqual(r.headers["X-Repo-Commit"], sha)
        self.assertEqual(r.headers["Content-Length"], "100")
        self.assertEqual(r.headers["Accept-Ranges"], "bytes")
        r = self.api("/org/plain/resolve/main/README.md", headers={"Range": "bytes=2-4"})
        self.assertEqual((r.status, r.body, r.headers["Content-Range"]), (206, b"hel", "bytes 2-4/8"))
        r = self.api("/org/plain/resolve/main/README.md", headers={"Range": "bytes=-3"})
        self.assertEqual((r.status, r.body, r.headers["Content-Range"]), (206, b"lo\n", "bytes 5-7/8"))
        r = self.api("/org/plain/resolve/main/README.md", headers={"Range": "bytes=8-"})
        self.assertEqual((r.status, r.headers["Content-Range"]), (416, "bytes */8"))
        r = self.api("/org/plain/resolve/main/README.md", method="HEAD")
        self.assertEqual((r.status, r.body, r.headers["Content-Length"]), (200, b"", "8"))

    def test_lfs_redirect_to_cdn(self):
        r = self.api("/org/plain/resolve/main/big.dat")
        self.assertEqual(r.status, 302)
        sha256 = hashlib.sha256(BIG).hexdigest()
        self.assertEqual(r.headers["X-Linked-Etag"], '"%s"' % sha256)
        self.assertEqual(r.headers["X-Linked-Size"], str(len(BIG)))
        self.assertRegex(r.headers["X-Repo-Commit"], "^[0-9a-f]{40}$")
        location = r.headers["Location"]
        self.assertTrue(location.startswith(self.hub.cdn + "/blobs/" + sha256 + "?"), location)
        self.assertNotEqual(self.hub.cdn, self.hub.url)

        c = request(location, headers={"Range": "bytes=1000-1999"})
        self.assertEqual(c.status, 206)
        self.assertEqual(c.headers["Content-Range"], "bytes 1000-1999/%d" % len(BIG))
        self.assertEqual(c.body, BIG[1000:2000])
        c = request(location, headers={"Range": "bytes=199990-300000"})
        self.assertEqual((c.status, c.body), (206, BIG[199990:]))
        self.assertEqual(c.headers["Content-Range"], "bytes 199990-199999/200000")
        self.assertEqual(request(location).body, BIG)
        self.assertEqual(request(location, headers={"Range": "bytes=200000-"}).status, 416)
        h = request(location, method="HEAD")
        self.assertEqual((h.status, h.headers["Content-Length"], h.body), (200, str(len(BIG)), b""))

    def test_cdn_signature_and_expiry(self):
        location = self.api("/org/plain/resolve/main/big.dat").headers["Location"]
        base, query = location.split("?")
        params = urllib.parse.parse_qs(query)
        bad_sig = "%s?expires=%s&sig=%s" % (base, params["expires"][0], "0" * 64)
        self.assertEqual(request(bad_sig).status, 403)
        later = "%s?expires=%d&sig=%s" % (base, int(params["expires"][0]) + 10, params["sig"][0])
        self.assertEqual(request(later).status, 403)
        self.assertEqual(request(base).status, 403)
        self.assertEqual(request(location).status, 200)
        self.assertEqual(self.api("/_hubfs/expire", method="POST").status, 200)
        self.assertEqual(request(location, headers={"Range": "bytes=0-0"}).status, 403)
        fresh = self.api("/org/plain/resolve/main/big.dat").headers["Location"]
        self.assertEqual(request(fresh, headers={"Range": "bytes=0-0"}).status, 206)

    def test_url_ttl(self):
        server = Server(self.root, "--url-ttl", "1")
        try:
            location = request(server.url + "/org/plain/resolve/main/big.dat").headers["Location"]
            self.assertEqual(request(location, method="HEAD").status, 200)
            time.sleep(2.1)  # expiry is checked at one-second resolution
            self.assertEqual(request(location, method="HEAD").status, 403)
        finally:
            server.stop()

    def test_keep_alive(self):
        u = urllib.parse.urlsplit(self.hub.url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        try:
            for _ in range(3):
                self.assertEqual(request(self.hub.url + "/org/plain/resolve/main/README.md", conn=conn).body,
                                 b"# hello\n")
                self.assertEqual(request(self.hub.url + "/org/plain/resolve/main/big.dat", conn=conn).status, 302)
        finally:
            conn.close()

    def test_renamed_repo_redirects_relative(self):
        r = self.api("/org/old-name/resolve/main/README.md?x=1")
        self.assertEqual((r.status, r.headers["Location"]), (307, "/org/plain/resolve/main/README.md?x=1"))
        r = self.api("/api/models/org/old-name/tree/main")
        self.assertEqual((r.status, r.headers["Location"]), (307, "/api/models/org/plain/tree/main"))

    # --- errors and access ------------------------------------------------------------------

    def test_errors(self):
        self.assertHubError(self.api("/api/models/org/missing"), 404, "RepoNotFound")
        self.assertHubError(self.api("/org/missing/resolve/main/x"), 404, "RepoNotFound")
        self.assertHubError(self.api("/api/models/org/plain/revision/nope"), 404, "RevisionNotFound")
        self.assertHubError(self.api("/org/plain/resolve/nope/README.md"), 404, "RevisionNotFound")
        r = self.api("/org/plain/resolve/main/nope.txt")
        self.assertHubError(r, 404, "EntryNotFound")
        self.assertRegex(r.headers["X-Repo-Commit"], "^[0-9a-f]{40}$")
        self.assertHubError(self.api("/org/plain/resolve/main/sub"), 404, "EntryNotFound")
        self.assertEqual(self.api("/org/plain/resolve/main/..%2F..%2Fhub.json").status, 404)
        self.assertEqual(self.api("/api/nonsense").status, 404)

    def test_private_repo_needs_token(self):
        for path in ("/api/models/org/private", "/org/private/resolve/main/secret.txt",
                     "/api/models/org/private/tree/main"):
            self.assertHubError(self.api(path), 401, "RepoNotFound")
            self.assertHubError(self.api(path, headers={"Authorization": "Bearer " + TOKEN_NO_ACCESS}), 404,
                                "RepoNotFound")
            self.assertEqual(self.api(path, headers={"Authorization": "Bearer " + TOKEN}).status, 200, path)
        self.assertTrue(self.api("/api/models/org/private", headers={"Authorization": "Bearer " + TOKEN})
                        .json()["private"])

    def test_gated_repo_needs_token(self):
        path = "/org/gated/resolve/main/secret.txt"
        self.assertHubError(self.api(path), 401, "GatedRepo")
        refused = self.api(path, headers={"Authorization": "Bearer " + TOKEN_NO_ACCESS})
        self.assertHubError(refused, 403, "GatedRepo")
        self.assertIn(self.hub.url + "/org/gated", refused.headers["X-Error-Message"])  # the repo page
        r = self.api(path, headers={"Authorization": "Bearer " + TOKEN})
        self.assertEqual((r.status, r.body), (200, b"s3cret"))

    def test_gated_repo_lists_and_shows_its_card_to_anyone(self):
        info = self.api("/api/models/org/gated/revision/main")
        self.assertEqual(info.status, 200, info.body)
        self.assertEqual(info.json()["gated"], "manual")
        entries, _ = self.list_all("/api/models/org/gated/tree/main")
        self.assertEqual(sorted(e["path"] for e in entries), [".gitattributes", "README.md", "secret.txt"])
        card = self.api("/org/gated/resolve/main/README.md")
        self.assertEqual((card.status, card.body), (200, b"# gated\n"))
        # The live Hub gates .gitattributes too: only the card is public.
        self.assertHubError(self.api("/org/gated/resolve/main/.gitattributes"), 401, "GatedRepo")

    def test_raw_gives_git_content_and_head_is_the_default_branch(self):
        # huggingface.js fileExists asks HEAD /raw/; modelInfo asks /revision/HEAD.
        r = self.api("/org/plain/raw/main/README.md")
        self.assertEqual((r.status, r.body), (200, b"# hello\n"))
        pointer = self.api("/org/plain/raw/main/big.dat")
        self.assertEqual(pointer.status, 200)
        self.assertEqual(pointer.body, ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n"
                                        % (hashlib.sha256(BIG).hexdigest(), len(BIG))).encode())
        self.assertEqual(pointer.headers["ETag"], '"%s"' % hashlib.sha1(b"blob %d\0" % len(pointer.body)
                                                                        + pointer.body).hexdigest())
        self.assertHubError(self.api("/org/plain/raw/main/nope.txt"), 404, "EntryNotFound")
        self.assertEqual(self.api("/org/plain/raw/main/README.md", method="HEAD").status, 200)
        self.assertHubError(self.api("/org/gated/raw/main/secret.txt"), 401, "GatedRepo")
        info = self.api("/api/models/org/plain/revision/HEAD")
        self.assertEqual(info.status, 200, info.body)
        self.assertEqual(info.json()["sha"], self.api("/api/models/org/plain").json()["sha"])
        self.assertRegex(info.json()["_id"], "^[0-9a-f]{24}$")

    def test_small_files_redirect_to_the_resolve_cache(self):
        hub = Server(self.root, "--resolve-cache")
        try:
            r = request(hub.url + "/datasets/org/versioned/resolve/v1/a.txt")
            self.assertEqual(r.status, 307, r.body)
            commit = sha1_commit("org/versioned", "c1")
            self.assertEqual(r.headers["Location"],
                             "/api/resolve-cache/datasets/org/versioned/%s/a.txt?%s=&etag=%s" % (
                                 commit, urllib.parse.quote("/datasets/org/versioned/resolve/v1/a.txt", safe=""),
                                 urllib.parse.quote(r.headers["ETag"], safe="")))
            self.assertEqual(r.headers["X-Repo-Commit"], commit)
            got = request(hub.url + r.headers["Location"], headers={"Range": "bytes=1-2"})
            self.assertEqual((got.status, got.body, got.headers["ETag"]), (206, b"ne", r.headers["ETag"]))
            # LFS files still go straight to the CDN; both hops above are resolver calls.
            self.assertEqual(request(hub.url + "/org/plain/resolve/main/big.dat").status, 302)
            self.assertEqual(request(hub.url + "/_hubfs/stats").json()["resolve_requests"], 3)
            gated = request(hub.url + "/org/gated/resolve/main/secret.txt")
            self.assertEqual(gated.status, 401)  # the gate comes before the redirect
        finally:
            hub.stop()

    def test_invalid_token_is_refused_everywhere(self):
        for path in ("/api/models/org/plain", "/api/models/org/plain/tree/main", "/org/plain/resolve/main/README.md",
                     "/api/models/org/gated/tree/main", "/api/models/org/missing"):
            r = self.api(path, headers={"Authorization": "Bearer hf_revoked"})
            self.assertEqual(r.status, 401, path)
            self.assertEqual(r.headers["X-Error-Message"], "Invalid credentials in Authorization header")
            self.assertIsNone(r.headers.get("X-Error-Code"))
        self.assertEqual(self.api("/api/models/org/plain", headers={"Authorization": "Bearer " + TOKEN_NO_ACCESS})
                         .status, 200)

    # --- stats ------------------------------------------------------------------------------

    def test_stats_counters(self):
        self.api("/api/models/org/plain")
        self.api("/api/models/org/plain/tree/main")
        self.api("/org/plain/resolve/main/README.md", headers={"Range": "bytes=0-1"})
        location = self.api("/org/plain/resolve/main/big.dat").headers["Location"]
        request(location, headers={"Range": "bytes=0-99"})
        request(location, headers={"Range": "bytes=100-199", "Authorization": "Bearer " + TOKEN})
        s = self.stats()
        self.assertEqual(s["requests"], 6)
        self.assertEqual(s["api_requests"], 2)
        self.assertEqual(s["resolve_requests"], 2)
        self.assertEqual(s["cdn_requests"], 2)
        self.assertEqual(s["range_requests"], 3)
        self.assertEqual(s["cdn_authorization_headers"], 1)
        self.assertGreaterEqual(s["bytes_sent"], 202)
        self.assertEqual(s["peak_concurrency"], 1)
        self.assertEqual(s["by_path"]["/org/plain/resolve/main/big.dat"], 1)
        self.api("/_hubfs/reset", method="POST")
        s = self.stats()
        self.assertEqual((s["requests"], s["bytes_sent"], s["by_path"]), (0, 0, {}))

    def test_trace_lists_requests_in_order(self):
        self.api("/_hubfs/reset", method="POST")
        self.api("/api/models/org/plain")
        location = self.api("/org/plain/resolve/main/big.dat").headers["Location"]
        request(location, headers={"Range": "bytes=0-99"})
        trace = self.api("/_hubfs/trace").json()
        self.assertEqual([e["kind"] for e in trace], ["api", "resolve", "cdn"])
        self.assertEqual(trace[2]["range"], "bytes=0-99")
        self.assertEqual([e["status"] for e in trace], [200, 302, 206])
        for e in trace:
            self.assertLessEqual(e["begin"], e["end"])
        self.assertLessEqual(trace[0]["end"], trace[1]["begin"])
        self.api("/_hubfs/reset", method="POST")
        self.assertEqual(self.api("/_hubfs/trace").json(), [])

    # --- the plain HTTP view ----------------------------------------------------------------

    def test_plain_view_index(self):
        r = self.api("/_plain/models/org/plain/main/")
        self.assertEqual(r.status, 200, r.body)
        self.assertTrue(r.headers["Content-Type"].startswith("text/html"))
        self.assertEqual(links(r.body), ["README.md", "big.dat", "config.json", "many/", "sub/", "weights.bin"])
        self.assertEqual(links(self.api("/_plain/models/org/plain/main/sub/").body), ["deep/", "y.txt"])
        self.assertEqual(links(self.api("/_plain/models/org/plain/main/sub/deep/").body), ["x.txt"])
        # Names that need escaping come back as links that resolve to them.
        hrefs = links(self.api("/_plain/datasets/org/web/main/").body)
        self.assertEqual(hrefs, ["a%20b%26c%3Cd%3E.txt", "dir%20one/"])
        self.assertEqual(self.api("/_plain/datasets/org/web/main/" + hrefs[0]).body, b"odd")
        self.assertEqual(links(self.api("/_plain/datasets/org/web/main/" + hrefs[1]).body), ["x.txt"])
        # A directory without its slash redirects to it (the links are relative to it).
        r = self.api("/_plain/models/org/plain/main/sub")
        self.assertEqual((r.status, r.headers["Location"]), (301, "/_plain/models/org/plain/main/sub/"))
        r = self.api("/_plain/models/org/plain/main")
        self.assertEqual((r.status, r.headers["Location"]), (301, "/_plain/models/org/plain/main/"))

    def test_plain_view_files_and_ranges(self):
        base = "/_plain/models/org/plain/main/"
        r = self.api(base + "big.dat")  # an LFS file: its bytes, not a redirect
        self.assertEqual((r.status, r.body), (200, BIG))
        self.assertEqual(r.headers["Content-Length"], str(len(BIG)))
        self.assertEqual(r.headers["Accept-Ranges"], "bytes")
        self.assertIsNotNone(email.utils.parsedate_to_datetime(r.headers["Last-Modified"]))
        r = self.api(base + "big.dat", headers={"Range": "bytes=1000-1999"})
        self.assertEqual((r.status, r.body), (206, BIG[1000:2000]))
        self.assertEqual(r.headers["Content-Range"], "bytes 1000-1999/%d" % len(BIG))
        r = self.api(base + "big.dat", headers={"Range": "bytes=199990-"})
        self.assertEqual((r.status, r.body, r.headers["Content-Range"]), (206, BIG[199990:], "bytes 199990-199999/200000"))
        r = self.api(base + "big.dat", headers={"Range": "bytes=-5"})
        self.assertEqual((r.status, r.body), (206, BIG[-5:]))
        r = self.api(base + "big.dat", headers={"Range": "bytes=200000-"})
        self.assertEqual((r.status, r.headers["Content-Range"]), (416, "bytes */200000"))
        r = self.api(base + "big.dat", method="HEAD")
        self.assertEqual((r.status, r.headers["Content-Length"], r.body), (200, str(len(BIG)), b""))
        r = self.api(base + "sub/deep/x.txt", headers={"Range": "bytes=0-9"})
        self.assertEqual((r.status, r.body), (206, b"x" * 10))
        self.assertEqual(self.api(base + "weights.bin").body, b"\x01\x02\x03")

    def test_plain_view_revisions_and_errors(self):
        base = "/_plain/datasets/org/versioned/"
        self.assertEqual(links(self.api(base + "main/").body), ["a.txt", "b.txt"])
        self.assertEqual(links(self.api(base + "v1/").body), ["a.txt"])
        self.assertEqual(self.api(base + "v1/a.txt").body, b"one")
        self.assertEqual(self.api(base + "refs%2Fpr%2F1/a.txt").body, b"one")
        self.assertEqual(self.api(base + sha1_commit("org/versioned", "c1") + "/a.txt").body, b"one")
        r = self.api(base + "main/a.txt")
        self.assertEqual(r.body, b"two")
        self.assertEqual(email.utils.parsedate_to_datetime(r.headers["Last-Modified"]).isoformat(),
                         "2024-02-01T00:00:00+00:00")
        self.assertHubError(self.api(base + "v1/b.txt"), 404, "EntryNotFound")
        self.assertHubError(self.api(base + "nope/a.txt"), 404, "RevisionNotFound")
        self.assertHubError(self.api(base + "main/a.txt/"), 404, "EntryNotFound")
        self.assertHubError(self.api("/_plain/models/org/missing/main/"), 404, "RepoNotFound")
        self.assertEqual(self.api("/_plain/models/org/plain/main/..%2F..%2Fetc/").status, 404)
        self.assertEqual(self.api("/_plain/models/org/plain/main/README.md", method="POST").status, 405)
        self.assertEqual(self.api("/_plain/models/org").status, 404)
        # Private repos need the token, as everywhere else.
        self.assertHubError(self.api("/_plain/models/org/private/main/secret.txt"), 401, "RepoNotFound")
        r = self.api("/_plain/models/org/private/main/secret.txt", headers={"Authorization": "Bearer " + TOKEN})
        self.assertEqual((r.status, r.body), (200, b"s3cret"))

    def test_plain_view_counted_as_data_requests(self):
        self.api("/_plain/models/org/plain/main/")
        self.api("/_plain/models/org/plain/main/big.dat", headers={"Range": "bytes=0-99"})
        self.api("/_plain/models/org/plain/main/big.dat", method="HEAD")
        s = self.stats()
        self.assertEqual((s["requests"], s["plain_requests"], s["range_requests"], s["head_requests"]), (3, 3, 1, 1))
        self.assertEqual((s["api_requests"], s["resolve_requests"], s["cdn_requests"]), (0, 0, 0))
        self.assertEqual(s["in_flight"], 0)
        self.assertGreaterEqual(s["in_flight_seconds"], 0)

    # --- faults -----------------------------------------------------------------------------

    def add_fault(self, spec):
        r = self.api("/_hubfs/faults", method="POST", body=json.dumps(spec))
        self.assertEqual(r.status, 200, r.body)

    def test_fault_status_with_retry_after(self):
        self.add_fault({"status": 503, "count": 2, "path_contains": "README", "retry_after": 1})
        self.assertEqual(self.api("/org/plain/resolve/main/config.json").status, 200)  # no match
        for _ in range(2):
            r = self.api("/org/plain/resolve/main/README.md")
            self.assertEqual((r.status, r.headers["Retry-After"]), (503, "1"))
        self.assertEqual(self.api("/org/plain/resolve/main/README.md").status, 200)
        self.assertEqual(self.stats()["faults_injected"], 2)

    def test_fault_modes_on_ranges(self):
        location = self.api("/org/plain/resolve/main/big.dat").headers["Location"]
        self.add_fault({"mode": "ignore_range", "origin": "cdn"})
        r = request(location, headers={"Range": "bytes=10-19"})
        self.assertEqual((r.status, len(r.body)), (200, len(BIG)))
        self.add_fault({"mode": "bad_content_range"})
        r = request(location, headers={"Range": "bytes=10-19"})
        self.assertEqual(r.status, 206)
        self.assertNotEqual(r.headers["Content-Range"], "bytes 10-19/%d" % len(BIG))
        r = request(location, headers={"Range": "bytes=10-19"})
        self.assertEqual((r.status, r.headers["Content-Range"], r.body), (206, "bytes 10-19/200000", BIG[10:20]))

    def test_fault_reset_and_stall(self):
        self.add_fault({"mode": "reset", "path_contains": "README"})
        with self.assertRaises((ConnectionError, http.client.HTTPException)):
            self.api("/org/plain/resolve/main/README.md")
        self.assertEqual(self.api("/org/plain/resolve/main/README.md").status, 200)

        location = self.api("/org/plain/resolve/main/big.dat").headers["Location"]
        self.add_fault({"mode": "reset", "after_bytes": 1000, "origin": "cdn"})
        with self.assertRaises((ConnectionError, http.client.HTTPException)):
            request(location)

        self.add_fault({"mode": "stall", "stall_ms": 500})
        t0 = time.monotonic()
        self.assertEqual(self.api("/org/plain/resolve/main/README.md").status, 200)
        self.assertGreaterEqual(time.monotonic() - t0, 0.5)

    def test_fault_truncate_closes_cleanly_short_of_content_length(self):
        location = self.api("/org/plain/resolve/main/big.dat").headers["Location"]
        self.add_fault({"mode": "truncate", "after_bytes": 1000, "origin": "cdn"})
        u = urllib.parse.urlsplit(location)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("GET", u.path + "?" + u.query, headers={"Range": "bytes=0-9999"})
        resp = conn.getresponse()
        self.assertEqual((resp.status, resp.headers["Content-Length"]), (206, "10000"))
        # The bytes that do arrive are the right ones; then the server closes (an orderly EOF,
        # which http.client reports as IncompleteRead, not a reset).
        with self.assertRaises(http.client.IncompleteRead) as cm:
            resp.read()
        self.assertEqual(cm.exception.partial, BIG[:1000])
        conn.close()
        # Without after_bytes, half of the body arrives.
        self.add_fault({"mode": "truncate", "origin": "cdn"})
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        conn.request("GET", u.path + "?" + u.query, headers={"Range": "bytes=100-299"})
        with self.assertRaises(http.client.IncompleteRead) as cm:
            conn.getresponse().read()
        self.assertEqual(cm.exception.partial, BIG[100:200])
        conn.close()
        self.assertEqual(request(location, headers={"Range": "bytes=0-9999"}).body, BIG[:10000])

    def test_fault_flip_byte_keeps_length_and_headers(self):
        location = self.api("/org/plain/resolve/main/big.dat").headers["Location"]
        self.add_fault({"mode": "flip_byte", "origin": "cdn"})
        r = request(location, headers={"Range": "bytes=1000-1999"})
        self.assertEqual((r.status, r.headers["Content-Range"], len(r.body)), (206, "bytes 1000-1999/200000", 1000))
        want = bytearray(BIG[1000:2000])
        want[500] ^= 0xFF
        self.assertEqual(r.body, bytes(want))
        self.add_fault({"mode": "flip_byte", "flip_offset": 0})
        r = self.api("/org/plain/resolve/main/README.md")
        self.assertEqual(r.body, bytes([ord("#") ^ 0xFF]) + b" hello\n")
        self.add_fault({"mode": "flip_byte", "flip_offset": 10 ** 9})  # past the end: the last byte
        r = request(location)
        self.assertEqual((r.status, r.body[:-1], r.body[-1]), (200, BIG[:-1], BIG[-1] ^ 0xFF))
        self.assertEqual(request(location).body, BIG)
        self.assertEqual(self.stats()["faults_injected"], 3)

    def test_fault_range_regex_picks_requests_by_their_range(self):
        location = self.api("/org/plain/resolve/main/big.dat").headers["Location"]
        self.add_fault({"status": 503, "origin": "cdn", "range_regex": "^bytes=[0-9]", "retry_after": 0})
        # A suffix range and a request without a Range pass; the first ranged one with a start is hit.
        self.assertEqual(request(location, headers={"Range": "bytes=-10"}).body, BIG[-10:])
        self.assertEqual(request(location).status, 200)
        self.assertEqual(request(location, headers={"Range": "bytes=5-9"}).status, 503)
        self.assertEqual(request(location, headers={"Range": "bytes=5-9"}).body, BIG[5:10])

    def test_fault_status_with_long_error_body(self):
        self.add_fault({"status": 503, "body_bytes": 100000, "path_contains": "README", "retry_after": 0})
        r = self.api("/org/plain/resolve/main/README.md", headers={"Range": "bytes=0-3"})
        self.assertEqual((r.status, len(r.body), r.headers["Content-Length"]), (503, 100000, "100000"))
        self.assertIn("error", r.json())  # padding is whitespace: still the Hub's JSON shape
        r = self.api("/org/plain/resolve/main/README.md", headers={"Range": "bytes=0-3"})
        self.assertEqual((r.status, r.body), (206, b"# he"))

    def test_fault_max_consecutive_lets_the_same_request_through(self):
        # Paths no other test faults: streaks outlive DELETE /_hubfs/faults (by design).
        self.add_fault({"status": 503, "count": 100, "path_contains": "y.txt", "max_consecutive": 2})
        statuses = [self.api("/org/plain/resolve/main/sub/y.txt").status for _ in range(6)]
        self.assertEqual(statuses, [503, 503, 200, 503, 503, 200])
        # The key includes the range: another range of the same file has its own streak.
        ranged = [self.api("/org/plain/resolve/main/sub/y.txt", headers={"Range": "bytes=0-0"}).status
                  for _ in range(3)]
        self.assertEqual(ranged, [503, 503, 206])
        # Any fault counts toward the streak, not just the one that has max_consecutive.
        self.add_fault([{"status": 500, "path_contains": "f3.txt"},
                        {"status": 502, "count": 5, "path_contains": "f3.txt", "max_consecutive": 1}])
        statuses = [self.api("/org/plain/resolve/main/many/f3.txt").status for _ in range(4)]
        self.assertEqual(statuses, [500, 200, 502, 200])

    def test_bad_fault_rejected(self):
        for spec in ({"mode": "explode"}, {"status": 503, "bogus": 1}, {}, {"status": 503, "count": 0},
                     {"status": 503, "max_consecutive": 0}, {"mode": "stall", "body_bytes": 10},
                     {"mode": "truncate", "flip_offset": 1}, {"mode": "flip_byte", "after_bytes": 1},
                     {"status": 503, "range_regex": "("}):
            self.assertEqual(self.api("/_hubfs/faults", method="POST", body=json.dumps(spec)).status, 400, spec)


class LatencyAndBandwidthTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="hub-server-test-")
        build_root(cls.root)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def test_latency_on_both_origins_and_peak_concurrency(self):
        server = Server(self.root, "--latency-ms", str(LATENCY_MS))
        try:
            t0 = time.monotonic()
            r = request(server.url + "/org/plain/resolve/main/big.dat")
            t1 = time.monotonic()
            request(r.headers["Location"], headers={"Range": "bytes=0-9"})
            t2 = time.monotonic()
            self.assertGreaterEqual(t1 - t0, LATENCY_MS / 1000)
            self.assertGreaterEqual(t2 - t1, LATENCY_MS / 1000)

            request(server.url + "/_hubfs/reset", "POST")
            threads = [threading.Thread(target=request, args=(server.url + "/api/models/org/plain",))
                       for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            s = request(server.url + "/_hubfs/stats").json()
            self.assertEqual(s["requests"], 4)
            self.assertGreaterEqual(s["peak_concurrency"], 2)
        finally:
            server.stop()

    def test_control_requests_are_not_delayed(self):
        # A latency far beyond any scheduling delay of a loaded machine, so the bound cannot
        # flake: a delayed control request would take at least 5 s.
        server = Server(self.root, "--latency-ms", "5000")
        try:
            t0 = time.monotonic()
            request(server.url + "/_hubfs/stats")
            self.assertLess(time.monotonic() - t0, 5.0)
        finally:
            server.stop()

    def test_bandwidth_limit(self):
        server = Server(self.root, "--bandwidth-mbps", "8")  # 1 MB/s
        try:
            location = request(server.url + "/org/plain/resolve/main/big.dat").headers["Location"]
            t0 = time.monotonic()
            r = request(location)
            elapsed = time.monotonic() - t0
            self.assertEqual(r.body, BIG)
            self.assertGreaterEqual(elapsed, 0.15)  # 200 KB at 1 MB/s is 0.2 s
            self.assertLess(elapsed, 20.0)  # shaped, not stuck (generous: the machine may be loaded)
        finally:
            server.stop()

    def test_host_cap_is_shared_by_every_connection(self):
        # 16 MB in a repo of its own (the class's repos keep their listings), fetched as four
        # concurrent 4 MB ranges with a host cap of 80 Mbit/s (10 MB/s) and no per-connection
        # cap: together they cannot take less than ~1.6 s (one 20 ms burst aside). Without the
        # shared bucket each would go out by sendfile in a few milliseconds. Only a lower bound:
        # a loaded machine can only make it slower.
        part = 4 << 20
        data = bytes(range(256)) * (4 * part // 256)
        data = hashlib.sha256(b"host cap").digest() + data[32:]  # not periodic at its start
        root = tempfile.mkdtemp(prefix="hub-server-hostcap-")
        self.addCleanup(shutil.rmtree, root, True)
        write(os.path.join(root, "models", "org", "capped", "big.bin"), data)
        server = Server(root, "--host-mbps", "80")
        self.addCleanup(server.stop)
        location = request(server.url + "/org/capped/resolve/main/big.bin").headers["Location"]
        request(server.url + "/_hubfs/reset", "POST")
        bodies = [None] * 4

        def fetch(i):
            r = request(location, headers={"Range": "bytes=%d-%d" % (i * part, (i + 1) * part - 1)})
            bodies[i] = (r.status, r.body)

        threads = [threading.Thread(target=fetch, args=(i,)) for i in range(4)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        elapsed = time.monotonic() - t0
        for i, (status, body) in enumerate(bodies):
            self.assertEqual(status, 206)
            self.assertTrue(body == data[i * part:(i + 1) * part], "range %d: wrong bytes" % i)
        self.assertGreaterEqual(elapsed, 1.2)
        stats = request(server.url + "/_hubfs/stats").json()
        self.assertEqual(stats["bytes_sent"], 4 * part)
        self.assertGreaterEqual(stats["peak_concurrency"], 2)  # they did run side by side

    def test_host_cap_on_top_of_the_connection_cap(self):
        # 200 KB: 1 MB/s per connection, 0.4 MB/s (3.2 Mbit/s) for the host: the host's is the
        # tighter, so at least ~0.5 s (the per-connection cap alone: 0.2 s, test_bandwidth_limit).
        server = Server(self.root, "--bandwidth-mbps", "8", "--host-mbps", "3.2")
        self.addCleanup(server.stop)
        location = request(server.url + "/org/plain/resolve/main/big.dat").headers["Location"]
        t0 = time.monotonic()
        r = request(location)
        elapsed = time.monotonic() - t0
        self.assertEqual(r.body, BIG)
        self.assertGreaterEqual(elapsed, 0.4)

    def test_bad_rates_are_refused(self):
        for flag in ("--host-mbps", "--bandwidth-mbps"):
            r = subprocess.run(["/usr/bin/python3", SERVER, "--root", self.root, flag, "-1"],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--host-mbps", r.stderr)

    def test_exits_when_stdin_closes(self):
        server = Server(self.root, "--exit-on-stdin-eof")
        server.proc.stdin.close()
        self.assertEqual(server.proc.wait(5), 0)
        server.proc.stdout.close()
        server.proc.stderr.close()


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from hub_server.quotas import QuotaTable, parse_quota_spec  # noqa: E402  (the module under test)
from hub_server.shaping import BodyCopy, HostBucket, Shaping  # noqa: E402


class QuotaTableTest(unittest.TestCase):
    """The fixed-window arithmetic, on an injected clock (no waiting)."""

    def test_fixed_windows_per_bucket_and_caller(self):
        now = [1000.0]
        q = QuotaTable({"api": 2, "resolvers": 1}, 10, clock=lambda: now[0])
        self.assertEqual(q.charge("api", None),
                         (True, {"RateLimit": '"api";r=1;t=10', "RateLimit-Policy": '"fixed window";"api";q=2;w=10'}))
        now[0] = 1003.5
        self.assertEqual(q.charge("api", None)[1]["RateLimit"], '"api";r=0;t=7')  # t counts down to the reset
        allowed, headers = q.charge("api", None)
        self.assertFalse(allowed)
        self.assertEqual(headers["RateLimit"], '"api";r=0;t=7')
        self.assertTrue(q.charge("api", "hf_tok")[0])       # another caller has its own count
        self.assertTrue(q.charge("resolvers", None)[0])     # another bucket too
        self.assertFalse(q.charge("resolvers", None)[0])
        now[0] = 1010.0                                      # the window resets: full quota again
        self.assertEqual(q.charge("api", None), (True, {"RateLimit": '"api";r=1;t=10',
                                                        "RateLimit-Policy": '"fixed window";"api";q=2;w=10'}))
        self.assertEqual(q.rejected, 2)
        self.assertEqual(q.charge("pages", None), (True, {}))  # no quota: not limited, nothing announced

    def test_quota_spec(self):
        self.assertEqual(parse_quota_spec("api=30, resolvers=200"), {"api": 30, "resolvers": 200})
        for bad in ("api", "web=3", "api=-1", "api=x"):
            with self.assertRaises(ValueError):
                parse_quota_spec(bad)


class HostBucketTest(unittest.TestCase):
    """The host-wide bucket's booking arithmetic, on an injected clock (no waiting)."""

    def test_books_slices_one_after_another_at_the_host_rate(self):
        now = [100.0]
        slept = []
        bucket = HostBucket(1024, burst_s=0.25, clock=lambda: now[0], sleep=slept.append)
        # An idle host banks at most burst_s: the first slice may go out 0.25 s "early".
        self.assertEqual(bucket.book(512), 99.75)
        self.assertEqual(bucket.book(512), 100.25)   # after the first one's 0.5 s
        self.assertEqual(bucket.book(256), 100.75)
        bucket.take(256)                              # booked at 101.0: waits 1 s
        self.assertEqual(slept, [1.0])
        now[0] = 200.0                                # a long pause banks no more than burst_s
        self.assertEqual(bucket.book(1024), 199.75)
        bucket.take(64)                               # at 200.75, 0.75 s ahead
        self.assertEqual(slept, [1.0, 0.75])
        with self.assertRaises(ValueError):
            HostBucket(0)

    def test_concurrent_bookings_each_get_their_own_slot(self):
        bucket = HostBucket(1024, burst_s=0, clock=lambda: 0.0)
        starts = []
        lock = threading.Lock()

        def writer():
            mine = [bucket.book(64) for _ in range(2000)]
            with lock:
                starts.extend(mine)

        threads = [threading.Thread(target=writer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # 64 / 1024 = 1/16 s per slice, exact in binary: 16000 distinct slots end to end.
        self.assertEqual(sorted(starts), [i / 16 for i in range(16000)])


class _SendfileRecorder:
    """A socket that records the sendfile calls made on it (offset, count, and how many bytes had
    gone out before each) and passes them on."""

    def __init__(self, sock):
        self.sock, self.calls, self.sent = sock, [], 0

    def sendfile(self, f, offset, count):
        self.calls.append((offset, count))
        n = self.sock.sendfile(f, offset, count)
        self.sent += n
        return n


class _PacedBody(BodyCopy):
    """BodyCopy on a socket pair, without a server: stats, in-flight end and writes recorded."""

    def __init__(self, sock, shaping):
        self.stats = {}
        stats = type("Stats", (), {"add": lambda _, k, n: self.stats.__setitem__(k, self.stats.get(k, 0) + n)})()
        self.server = type("Server", (), {"state": type("State", (), {"shaping": shaping, "stats": stats})()})()
        self.connection = _SendfileRecorder(sock)
        self.writes = []
        self.wfile = type("Writer", (), {"write": lambda _, b: self.writes.append(len(b))})()
        self.done_at = []  # (bytes counted, bytes gone out) at each mark_done

    def mark_done(self):
        self.done_at.append((self.stats.get("bytes_sent", 0), self.connection.sent))


class PacedBodyTest(unittest.TestCase):
    """Paced file bodies go out by sendfile, slice by slice, with the same slices, the same byte
    counts and the in-flight end before the last slice as when they were read and written."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.data = os.urandom(3 * (1 << 20) + 70000)
        self.path = os.path.join(self.tmp, "blob")
        with open(self.path, "wb") as f:
            f.write(self.data)
        self.a, self.b = socket.socketpair()

    def tearDown(self):
        self.a.close()
        self.b.close()
        shutil.rmtree(self.tmp)

    def _send(self, offset, count):
        got = bytearray()

        def drain():
            while True:
                chunk = self.b.recv(1 << 16)
                if not chunk:
                    return
                got.extend(chunk)

        reader = threading.Thread(target=drain)
        reader.start()
        body = _PacedBody(self.a, Shaping(0, 8000))  # 1 GB/s: 1 MiB slices, no real waiting
        with open(self.path, "rb") as f:
            sent = body._copy_body(f, offset, count)
        self.a.shutdown(socket.SHUT_WR)
        reader.join()
        return body, sent, bytes(got)

    def test_paced_slices_go_out_by_sendfile(self):
        mib = 1 << 20
        offset, count = 1000, 3 * mib + 12345
        body, sent, got = self._send(offset, count)
        self.assertEqual(sent, count)
        self.assertEqual(got, self.data[offset:offset + count])
        self.assertEqual(body.writes, [])  # no body byte through Python's buffers
        self.assertEqual(body.connection.calls, [(offset + i * mib, mib) for i in range(3)] + [(offset + 3 * mib, 12345)])
        self.assertEqual(body.stats, {"bytes_sent": count})
        # Out of the in-flight count once, before the last slice, with every byte already counted.
        self.assertEqual(body.done_at, [(count, 3 * mib)])

    def test_a_body_past_the_end_of_its_file_counts_what_went_out(self):
        offset = len(self.data) - 100000
        body, sent, got = self._send(offset, 300000)
        self.assertEqual(sent, 100000)
        self.assertEqual(got, self.data[offset:])
        self.assertEqual(body.stats, {"bytes_sent": 100000})


class UnpacedBodyTest(unittest.TestCase):
    """An unpaced body (sendfile, no bandwidth limit) counts its bytes as they go out: a client
    that stops reading a long range leaves the body blocked, and the count read meanwhile holds
    what that client received (it was 0 until the body ended, so an abandoned stream's bytes
    never showed in a benchmark's fetched column)."""

    def test_a_stalled_body_has_counted_what_its_client_received(self):
        mib = 1 << 20
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        path = os.path.join(tmp, "blob")
        with open(path, "wb") as f:
            f.write(os.urandom(16 * mib))
        a, b = socket.socketpair()
        self.addCleanup(a.close)
        body = _PacedBody(a, Shaping(0, 0))
        result = []

        def send():
            with open(path, "rb") as f:
                result.append(body._copy_body(f, 0, 16 * mib))

        sender = threading.Thread(target=send)
        sender.start()
        received = 0
        while received < 4 * mib:
            chunk = b.recv(min(1 << 16, 4 * mib - received))
            self.assertTrue(chunk)
            received += len(chunk)
        # The client stops reading here. What it received went out in whole slices but the one in
        # progress: the count has all of them, while the body is still blocked.
        deadline = time.monotonic() + 30
        while body.stats.get("bytes_sent", 0) < received - mib and time.monotonic() < deadline:
            time.sleep(0.01)
        counted = body.stats.get("bytes_sent", 0)
        self.assertTrue(sender.is_alive())  # still blocked on the client
        self.assertGreaterEqual(counted, received - mib)
        self.assertLessEqual(counted, 16 * mib)
        b.close()  # the client goes: the body ends short, having counted only what went out
        sender.join(timeout=30)
        self.assertFalse(sender.is_alive())
        self.assertLess(result[0], 16 * mib)
        self.assertEqual(body.stats["bytes_sent"], result[0])


class RealHubBehaviourTest(unittest.TestCase):
    """Quotas over HTTP, signed-URL spellings, two-hop redirects, spurious 416s."""

    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="hub-server-real-")
        build_root(cls.root)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.root, ignore_errors=True)

    def start(self, *args):
        server = Server(self.root, "--token", TOKEN, *args)
        self.addCleanup(server.stop)
        return server

    def test_quota_headers_and_429(self):
        hub = self.start("--quota", "api=3,resolvers=2", "--quota-window", "3600")
        for i in range(3):
            r = request(hub.url + "/api/models/org/plain")
            self.assertEqual(r.status, 200)
            m = re.fullmatch(r'"api";r=(\d+);t=(\d+)', r.headers["RateLimit"])
            self.assertEqual(int(m.group(1)), 2 - i)
            self.assertTrue(1 <= int(m.group(2)) <= 3600)
            self.assertEqual(r.headers["RateLimit-Policy"], '"fixed window";"api";q=3;w=3600')
        over = request(hub.url + "/api/models/org/plain/tree/main")
        self.assertEqual(over.status, 429)
        self.assertRegex(over.headers["RateLimit"], r'^"api";r=0;t=\d+$')
        # Resolves are their own bucket, and a token its own caller.
        r = request(hub.url + "/org/plain/resolve/main/README.md")
        self.assertEqual((r.status, r.headers["RateLimit"][:16]), (200, '"resolvers";r=1;'))
        self.assertEqual(request(hub.url + "/api/models/org/plain",
                                 headers={"Authorization": "Bearer " + TOKEN}).status, 200)
        # The CDN and control requests are not counted.
        location = request(hub.url + "/org/plain/resolve/main/big.dat").headers["Location"]
        self.assertEqual(request(hub.url + "/org/plain/resolve/main/big.dat").status, 429)
        self.assertIsNone(request(location, headers={"Range": "bytes=0-9"}).headers.get("RateLimit"))
        snap = request(hub.url + "/_hubfs/quotas").json()
        self.assertEqual(snap["rejected"], 2)
        self.assertEqual(snap["used"]["api/anonymous"], 3)
        self.assertEqual(request(hub.url + "/_hubfs/stats").json()["rate_limited"], 2)

    def test_signed_url_styles(self):
        for style, keys in (("s3", {"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
                                    "X-Amz-SignedHeaders", "X-Amz-Signature"}),
                            ("cloudfront", {"Expires", "Signature", "Key-Pair-Id"})):
            hub = self.start("--url-style", style, "--url-ttl", "600")
            location = request(hub.url + "/org/plain/resolve/main/big.dat").headers["Location"]
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)
            self.assertTrue(keys <= set(query), (style, location))
            if style == "s3":
                self.assertEqual(query["X-Amz-Expires"], ["601"])
            r = request(location, headers={"Range": "bytes=10-19"})
            self.assertEqual((r.status, r.body), (206, BIG[10:20]), style)
            sig = "X-Amz-Signature" if style == "s3" else "Signature"
            tampered = location.replace(query[sig][0], "0" * len(query[sig][0]))
            self.assertEqual(request(tampered).status, 403, style)
            request(hub.url + "/_hubfs/expire", "POST")
            self.assertEqual(request(location).status, 403, style)

    def test_redirect_chain_of_two_hops(self):
        hub = self.start("--redirect-chain")
        first = request(hub.url + "/org/plain/resolve/main/big.dat", method="HEAD")
        self.assertEqual(first.status, 307)
        self.assertTrue(first.headers["Location"].startswith("/api/resolve-chain/models/org/plain/"))
        second = request(hub.url + first.headers["Location"], method="HEAD")
        self.assertEqual(second.status, 302)
        self.assertTrue(second.headers["Location"].startswith(hub.cdn + "/blobs/"))
        self.assertEqual(request(second.headers["Location"]).body, BIG)
        stats = request(hub.url + "/_hubfs/stats").json()
        self.assertEqual((stats["resolve_requests"], stats["api_requests"]), (2, 0))
        # Small files are still served at the first hop.
        self.assertEqual(request(hub.url + "/org/plain/resolve/main/README.md").body, b"# hello\n")

    def test_spurious_416(self):
        hub = self.start()
        location = request(hub.url + "/org/plain/resolve/main/big.dat").headers["Location"]
        request(hub.url + "/_hubfs/faults", "POST", body=json.dumps({"mode": "spurious_416", "count": 2}).encode())
        for _ in range(2):
            r = request(location, headers={"Range": "bytes=0-99"})
            self.assertEqual(r.status, 416)
            self.assertEqual(r.headers["Content-Range"], "bytes */%d" % len(BIG))
        r = request(location, headers={"Range": "bytes=0-99"})
        self.assertEqual((r.status, r.body), (206, BIG[:100]))


# The pack tool the Xet model runs (build/bin/hubfs-xet-pack); ctest passes its path.
XET_PACK = os.environ.get("HUBFS_XET_PACK") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "bin", "hubfs-xet-pack")


def decode_stored_chunks(data):
    """The content of a run of xorb chunks stored uncompressed (scheme 0: random bytes never
    compress), checking every header; the tests use incompressible content for that reason."""
    out, pos = b"", 0
    while pos < len(data):
        version, stored, scheme, size = data[pos], int.from_bytes(data[pos + 1:pos + 4], "little"), \
            data[pos + 4], int.from_bytes(data[pos + 5:pos + 8], "little")
        assert version == 0 and scheme == 0 and stored == size, (version, scheme, stored, size)
        out += data[pos + 8:pos + 8 + size]
        pos += 8 + size
    return out


@unittest.skipUnless(os.access(XET_PACK, os.X_OK), "hubfs-xet-pack is not built (cmake --build build --target hubfs_xet_pack)")
class XetModelTest(unittest.TestCase):
    """--xet: the token endpoint, reconstructions V1 and V2, signed xorb URLs, dedup across
    revisions (tools/hub_server/xet.py)."""

    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="hub-server-xet-")
        rng = __import__("random").Random(5)
        cls.one = bytes(rng.getrandbits(8) for _ in range(600_000))
        two = bytearray(cls.one)
        two[300_000:300_100] = bytes(100)
        cls.two = bytes(two)
        repo = os.path.join(cls.root, "datasets", "org", "xet")
        write(os.path.join(repo, "hub.json"), json.dumps({"refs": {"main": "c2", "v1": "c1"},
                                                          "commits": {"c1": {}, "c2": {}}}))
        write(os.path.join(repo, "snapshots", "c1", "w.bin"), cls.one)
        write(os.path.join(repo, "snapshots", "c2", "w.bin"), cls.two)
        # Strict whatever the suite's default: the model as the service signs (issue 39).
        cls.hub = Server(cls.root, "--xet", "--xet-pack", XET_PACK, "--strict-xet-ranges", "on")

    @classmethod
    def tearDownClass(cls):
        # The shutdown check every test's launcher makes: only the ranges refused on purpose.
        seen = request(cls.hub.url + "/_hubfs/refused-ranges").json()
        cls.hub.stop()
        assert seen["count"] == 0 or seen["expected"], seen
        shutil.rmtree(cls.root, ignore_errors=True)

    def token(self):
        r = request(self.hub.url + "/api/datasets/org/xet/xet-read-token/v1")
        self.assertEqual(r.status, 200, r.body)
        j = r.json()
        self.assertEqual(j["casUrl"], self.hub.cdn)
        self.assertEqual(r.headers["X-Xet-Access-Token"], j["accessToken"])
        self.assertEqual(int(r.headers["X-Xet-Token-Expiration"]), j["exp"])
        return j["accessToken"]

    def xet_hash(self, rev):
        entries = request(self.hub.url + "/api/datasets/org/xet/tree/" + rev).json()
        return entries[0]["xetHash"]

    def plan(self, version, xet_hash, rng, token):
        return request("%s/v%d/reconstructions/%s" % (self.hub.cdn, version, xet_hash),
                       headers={"Authorization": "Bearer " + token, "Range": rng})

    def test_listing_and_resolve_name_the_file_and_its_token(self):
        h = self.xet_hash("v1")
        self.assertRegex(h, "^[0-9a-f]{64}$")
        r = request(self.hub.url + "/datasets/org/xet/resolve/v1/w.bin", method="HEAD")
        self.assertEqual(r.status, 302)
        self.assertEqual(r.headers["X-Xet-Hash"], h)
        self.assertEqual(r.headers["Link"], '<%s/api/datasets/org/xet/xet-read-token/%s>; rel="xet-auth"'
                         % (self.hub.url, sha1_commit("org/xet", "c1")))

    def test_v1_and_v2_reconstruct_any_range(self):
        token, h = self.token(), self.xet_hash("v1")
        for a, b in ((0, len(self.one) - 1), (1234, 99_999), (len(self.one) - 1, len(self.one) - 1)):
            for version in (1, 2):
                r = self.plan(version, h, "bytes=%d-%d" % (a, b), token)
                self.assertEqual(r.status, 200, r.body)
                p = r.json()
                content = b""
                for term in p["terms"]:
                    if version == 1:
                        e = next(e for e in p["fetch_info"][term["hash"]] if e["range"] == term["range"])
                        url, first, last = e["url"], e["url_range"]["start"], e["url_range"]["end"]
                    else:
                        x = p["xorbs"][term["hash"]][0]
                        rr = next(rr for rr in x["ranges"] if rr["chunks"]["start"] <= term["range"]["start"]
                                  and term["range"]["end"] <= rr["chunks"]["end"])
                        url, first, last = x["url"], rr["bytes"]["start"], rr["bytes"]["end"]
                    got = request(url, headers={"Range": "bytes=%d-%d" % (first, last)})
                    self.assertEqual(got.status, 206, got.body)
                    decoded = decode_stored_chunks(got.body)
                    self.assertEqual(len(decoded), term["unpacked_length"]) if version == 1 else None
                    content += decoded
                skip = p["offset_into_first_range"]
                self.assertEqual(content[skip:skip + b - a + 1], self.one[a:b + 1], (version, a, b))

    def refused(self):
        return request(self.hub.url + "/_hubfs/refused-ranges").json()

    def test_v2_urls_serve_exactly_their_listed_ranges(self):
        token, h = self.token(), self.xet_hash("main")
        p = self.plan(2, h, "bytes=0-%d" % (len(self.two) - 1), token).json()
        # The changed chunk splits the first revision's xorb in two listed ranges of one URL.
        x = next(e for entries in p["xorbs"].values() for e in entries if len(e["ranges"]) > 1)
        ranges = [(r["bytes"]["start"], r["bytes"]["end"]) for r in x["ranges"]]
        self.assertIn("X-Xet-Signed-Range=bytes%3D", x["url"])
        for a, b in ranges:
            got = request(x["url"], headers={"Range": "bytes=%d-%d" % (a, b)})
            self.assertEqual((got.status, len(got.body)), (206, b - a + 1))
        # The whole listed set in one request: multipart/byteranges, a part per range, in order.
        whole = request(x["url"], headers={"Range": "bytes=" + ",".join("%d-%d" % r for r in ranges)})
        self.assertEqual(whole.status, 206, whole.body)
        ctype = whole.headers["Content-Type"]
        self.assertTrue(ctype.startswith("multipart/byteranges; boundary="), ctype)
        boundary = ctype.split("boundary=", 1)[1].encode()
        parts = whole.body.split(b"\r\n--" + boundary)
        self.assertEqual(parts[0], b"")
        self.assertEqual(parts[-1], b"--\r\n")
        for part, (a, b) in zip(parts[1:-1], ranges):
            head, _, data = part.partition(b"\r\n\r\n")
            self.assertIn(b"Content-Range: bytes %d-%d/" % (a, b), head)
            single = request(x["url"], headers={"Range": "bytes=%d-%d" % (a, b)}).body
            self.assertEqual(data, single)
        self.assertEqual(len(parts) - 2, len(ranges))

    def test_strict_urls_refuse_every_other_range_and_count_it(self):
        token, h = self.token(), self.xet_hash("main")
        before = self.refused()["count"]
        request(self.hub.url + "/_hubfs/refused-ranges/expect", "POST")  # sent on purpose below
        p = self.plan(2, h, "bytes=0-%d" % (len(self.two) - 1), token).json()
        x = next(e for entries in p["xorbs"].values() for e in entries if len(e["ranges"]) > 1)
        (a, b), (c, d) = [(r["bytes"]["start"], r["bytes"]["end"]) for r in x["ranges"][:2]]
        p1 = self.plan(1, h, "bytes=0-1000", token).json()
        e = next(iter(p1["fetch_info"].values()))[0]
        e0, e1 = e["url_range"]["start"], e["url_range"]["end"]
        self.assertIn("X-Xet-Signed-Range=bytes%%3D%d-%d" % (e0, e1), e["url"])
        self.assertEqual(request(e["url"], headers={"Range": "bytes=%d-%d" % (e0, e1)}).status, 206)
        refused = [
            (x["url"], "bytes=%d-%d" % (a, b - 1)),  # inside a listed range: narrowing
            (x["url"], "bytes=%d-%d" % (a, d)),  # spanning two, with the gap
            (x["url"], "bytes=%d-%d,%d-%d" % (c, d, a, b)),  # the set, reordered
            (x["url"], "bytes=-100"),  # a footer
            (x["url"], None),  # everything
            (e["url"], "bytes=-100"),  # V1 too: a footer
            (e["url"], "bytes=%d-%d" % (e0, e1 + 1)),  # past its url_range
        ]
        for url, rng in refused:
            got = request(url, headers={"Range": rng} if rng else {})
            self.assertEqual(got.status, 403, (rng, got.body))
            self.assertEqual(got.headers["X-Error-Code"], "AccessDenied")
        # A bad signature is refused too, but is no refused range.
        self.assertEqual(request(e["url"] + "x", headers={"Range": "bytes=%d-%d" % (e0, e1)}).status, 403)
        seen = self.refused()
        self.assertEqual(seen["count"] - before, len(refused))
        self.assertTrue(seen["expected"] and seen["strict"])
        self.assertEqual(request(self.hub.url + "/_hubfs/stats").json()["refused_ranges"] >= len(refused), True)

    def test_a_store_the_server_made_is_removed_when_it_stops(self):
        # Without --xet-store the packed xorbs go to a temporary directory of the server's own;
        # every test and bench run starts servers, so a store left behind fills /tmp.
        tmp = tempfile.mkdtemp(prefix="hub-server-tmp-")
        try:
            hub = Server(self.root, "--xet", "--xet-pack", XET_PACK, env=dict(os.environ, TMPDIR=tmp))
            try:
                h = request(hub.url + "/api/datasets/org/xet/tree/v1").json()[0]["xetHash"]
                self.assertTrue(h)
                self.assertEqual(len([n for n in os.listdir(tmp) if n.startswith("hubfs-xet-store-")]), 1)
            finally:
                hub.stop()
            self.assertEqual(hub.proc.returncode, 0)
            self.assertEqual(os.listdir(tmp), [])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_without_strictness_v1_urls_open_the_whole_xorb(self):
        lax = Server(self.root, "--xet", "--xet-pack", XET_PACK, "--strict-xet-ranges", "off")
        try:
            token = request(lax.url + "/api/datasets/org/xet/xet-read-token/v1").json()["accessToken"]
            h = request(lax.url + "/api/datasets/org/xet/tree/v1").json()[0]["xetHash"]
            auth = {"Authorization": "Bearer " + token, "Range": "bytes=0-1000"}
            e = next(iter(request("%s/v1/reconstructions/%s" % (lax.cdn, h), headers=auth)
                          .json()["fetch_info"].values()))[0]
            self.assertNotIn("X-Xet-Signed-Range", e["url"])
            self.assertEqual(request(e["url"], headers={"Range": "bytes=-100"}).status, 206)
            x = next(iter(request("%s/v2/reconstructions/%s" % (lax.cdn, h), headers=auth)
                          .json()["xorbs"].values()))[0]
            a, b = x["ranges"][0]["bytes"]["start"], x["ranges"][0]["bytes"]["end"]
            self.assertEqual(request(x["url"], headers={"Range": "bytes=%d-%d" % (a, b - 1)}).status, 206)
            self.assertEqual(request(x["url"], headers={"Range": "bytes=-100"}).status, 403)
            self.assertEqual(request(lax.url + "/_hubfs/refused-ranges").json()["count"], 0)
        finally:
            lax.stop()

    def test_a_xet_aware_client_gets_the_file_info_instead_of_the_bridge(self):
        # huggingface.js fileDownloadInfo: GET resolve, Range 0-0, Accept xet-fileinfo; it reads
        # X-Linked-Size, X-Xet-Hash, X-Linked-ETag and the two Link relations.
        r = request(self.hub.url + "/datasets/org/xet/resolve/v1/w.bin",
                    headers={"Range": "bytes=0-0", "Accept": "application/vnd.xet-fileinfo+json, */*"})
        self.assertEqual(r.status, 200, r.body)
        self.assertIn("application/vnd.xet-fileinfo+json", r.headers["Content-Type"])
        h = self.xet_hash("v1")
        self.assertEqual((r.headers["X-Xet-Hash"], int(r.headers["X-Linked-Size"])), (h, len(self.one)))
        self.assertEqual(r.headers["X-Linked-Etag"], '"%s"' % hashlib.sha256(self.one).hexdigest())
        self.assertIn('<%s/v1/reconstructions/%s>; rel="xet-reconstruction-info"' % (self.hub.cdn, h),
                      r.headers["Link"])
        self.assertIn('rel="xet-auth"', r.headers["Link"])
        self.assertIsNone(r.headers.get("Location"))

    def test_tokens_are_required_and_expire_with_the_keys(self):
        h = self.xet_hash("v1")
        self.assertEqual(request("%s/v1/reconstructions/%s" % (self.hub.cdn, h)).status, 401)
        token = self.token()
        self.assertEqual(self.plan(1, h, "bytes=0-10", token).status, 200)
        self.assertEqual(self.plan(1, h, "bytes=%d-" % len(self.one), token).status, 416)
        self.assertEqual(self.plan(1, "0" * 64, "bytes=0-10", token).status, 404)
        request(self.hub.url + "/_hubfs/expire", "POST")
        self.assertEqual(self.plan(1, h, "bytes=0-10", token).status, 401)

    def test_a_second_revision_shares_its_unchanged_chunks(self):
        token = self.token()
        terms = {}
        for rev in ("v1", "main"):
            p = self.plan(1, self.xet_hash(rev), "bytes=0-%d" % (len(self.one) - 1), token).json()
            terms[rev] = p["terms"]
        first_xorbs = {t["hash"] for t in terms["v1"]}
        shared = sum(t["unpacked_length"] for t in terms["main"] if t["hash"] in first_xorbs)
        # 100 bytes changed: one or two chunks of ~64 KiB are new, everything else is shared.
        self.assertGreater(shared, len(self.two) - 3 * 131072)
        self.assertLess(shared, len(self.two))
        stats = request(self.hub.url + "/_hubfs/stats").json()
        self.assertGreaterEqual(stats["xet_token_requests"], 1)


if __name__ == "__main__":
    unittest.main()
