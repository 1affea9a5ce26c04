"""The shutdown check every test's local Hub (tools/hub_server.py) gets, as tests/support/local_hub.cc
makes it for the C++ tests: a xorb Range the server refused under --strict-xet-ranges (bytes the
signed URL does not list, which the real service refuses too) fails the test, unless the test
said it sends such ranges on purpose (POST /_hubfs/refused-ranges/expect)."""

import json
import urllib.request


def assert_no_refused_ranges(endpoint):
    """Call before stopping the server at `endpoint` (its API origin, http://HOST:PORT)."""
    with urllib.request.urlopen(endpoint + "/_hubfs/refused-ranges", timeout=10) as r:
        seen = json.load(r)
    assert seen["count"] == 0 or seen["expected"], (
        "the local Hub refused %d xorb Range(s) their signed URLs do not list (a client must send "
        "exactly a listed range or the listed set): %s" % (seen["count"], seen["samples"]))
