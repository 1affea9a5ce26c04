"""The shutdown check every test's local Hub (tools/hub_server.py) gets, as tests/support/local_hub.cc
makes it for the C++ tests: a xorb Range the server refused under --strict-xet-ranges (bytes the
signed URL does not list, which the real service refuses too) fails the test, unless the test
said it sends such ranges on purpose (POST /_hubfs/refused-ranges/expect)."""

import contextlib
import json
import os
import subprocess
import sys
import urllib.request

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "hub_server.py")


def assert_no_refused_ranges(endpoint):
    """Call before stopping the server at `endpoint` (its API origin, http://HOST:PORT)."""
    with urllib.request.urlopen(endpoint + "/_hubfs/refused-ranges", timeout=10) as r:
        seen = json.load(r)
    assert seen["count"] == 0 or seen["expected"], (
        "the local Hub refused %d xorb Range(s) their signed URLs do not list (a client must send "
        "exactly a listed range or the listed set): %s" % (seen["count"], seen["samples"]))


def control(endpoint, method, path, body=None):
    """One request to the local Hub's control and stats routes (/_hubfs/...): its JSON answer.
    `body` (for POST) is sent as JSON."""
    req = urllib.request.Request(endpoint + path, method=method,
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"null")


@contextlib.contextmanager
def local_hub(root, *extra_args):
    """The local Hub serving `root` on loopback: yields its endpoint (http://127.0.0.1:PORT); at the
    end ends idle hf:// sessions, checks that it refused no xorb Range (assert_no_refused_ranges)
    and stops it. Its stdin
    stays a pipe this process holds, so the server exits with the tests even if they crash."""
    proc = subprocess.Popen(["/usr/bin/python3", SERVER, "--root", str(root), "--host", "127.0.0.1",
                             *extra_args, "--exit-on-stdin-eof"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().split()
        if len(line) != 4 or line[0] != "listening":
            proc.kill()
            raise RuntimeError(f"hub server did not start: {line} {proc.stderr.read()}")
        yield line[1]
        # Idle hf:// sessions end first: their read-ahead is then done and checked below, rather
        # than left retrying a stopped server until the interpreter exits.
        if "hubfs._remote" in sys.modules:
            sys.modules["hubfs._remote"].close_sessions()
        assert_no_refused_ranges(line[1])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
