"""`hubfs mount --metrics` and `hubfs status --prometheus` (issue 43): the exposition parses with
Prometheus's own parser (python3-prometheus-client), and at idle its counters equal
`hubfs status --json`. Against the bundled local Hub server (127.0.0.1, started here)."""

import json
import os
import subprocess
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from test_admin_commands import ENV, HUBFS, REPO, _mounted, hub  # noqa: F401 (hub: the fixture)


def _status(mnt):
    r = subprocess.run([HUBFS, "status", "--json", str(mnt)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)[0]


def _samples(text):
    """{(name, frozenset(labels)): value} of an exposition, parsed by prometheus_client."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


@pytest.fixture
def metrics_mount(hub, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([HUBFS, "mount", "--endpoint", hub["endpoint"], "--cache-dir", str(tmp_path / "cache"),
                        "--metrics", "127.0.0.1:0", REPO, str(mnt)], capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, r.stderr
    try:
        yield mnt
    finally:
        subprocess.run([HUBFS, "unmount", str(mnt)])
        if _mounted(mnt):
            subprocess.run(["umount", "-l", str(mnt)])


def test_metrics_parse_and_equal_status_json_at_idle(hub, metrics_mount):
    mnt = metrics_mount
    assert (mnt / "data" / "big.bin").read_bytes() == hub["big"]
    # Idle: nothing in flight or queued (read-ahead past the end has nothing left to fetch).
    for _ in range(200):
        status = _status(mnt)
        if status["in_flight"] == 0 and status["queued"] == 0:
            break
    address = status["metrics"]
    assert address and address.startswith("127.0.0.1:"), status
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        scraped = _samples(r.read().decode())
    status = _status(mnt)
    printed = subprocess.run([HUBFS, "status", "--prometheus", str(mnt)], capture_output=True, text=True)
    assert printed.returncode == 0, printed.stderr
    printed_text = printed.stdout
    printed = _samples(printed_text)

    mp = ("mountpoint", str(mnt))

    def value(samples, name, **labels):
        return samples[(name, frozenset({mp, *labels.items()}))]

    expected = {
        ("hubfs_upstream_requests_total", ()): status["requests"],
        ("hubfs_hub_requests_total", (("kind", "api"),)): status["api_calls"],
        ("hubfs_hub_requests_total", (("kind", "resolve"),)): status["resolves"],
        ("hubfs_hub_requests_total", (("kind", "range"),)): status["range_requests"],
        ("hubfs_fetched_bytes_total", ()): status["bytes_fetched"],
        ("hubfs_fetched_blocks_total", ()): status["blocks_fetched"],
        ("hubfs_fetch_errors_total", ()): status["errors"],
        ("hubfs_retries_total", ()): status["retries"],
        ("hubfs_hits_total", (("tier", "memory"),)): status["memory_hits"],
        ("hubfs_hits_total", (("tier", "disk"),)): status["disk_hits"],
        ("hubfs_evictions_total", (("tier", "disk"),)): status["disk_cache"]["evictions"],
        ("hubfs_cache_bytes", (("tier", "disk"),)): status["disk_cache"]["bytes_used"],
        ("hubfs_files_verified_total", ()): status["files_verified"],
        ("hubfs_verification_failures_total", ()): status["verify_failures"],
        ("hubfs_requests_in_flight", ()): 0,
    }
    for (name, labels), want in expected.items():
        assert value(scraped, name, **dict(labels)) == want, name
        assert value(printed, name, **dict(labels)) == want, name
    # What was read shows: 2.5 MB, three 1 MiB blocks, fetched.
    assert status["bytes_fetched"] >= len(hub["big"]) and status["blocks_fetched"] >= 3
    assert value(scraped, "hubfs_mount_info", repo=status["repo"], revision=status["revision"],
                 commit=status["commit"]) == 1
    # Every counter of the endpoint is in `status --prometheus` with the same value.
    for key, v in scraped.items():
        if key[0].endswith("_total"):
            assert printed[key] == v, key
    # Read-latency histograms: a Prometheus histogram family whose counts equal the request
    # counters at idle (one observation per request), buckets cumulative and ending in +Inf.
    families = {f.name: f.type for f in text_string_to_metric_families(printed_text)}
    assert families.get("hubfs_read_latency_seconds") == "histogram", families
    counted = {"hub": status["api_calls"] + status["resolves"], "cdn": status["range_requests"],
               "disk": status["disk_hits"]}
    assert counted["hub"] > 0 and counted["cdn"] > 0, counted
    assert status["latency"]["shared"] is None  # no shared tier: no samples
    for samples in (scraped, printed):
        for source, want in counted.items():
            assert value(samples, "hubfs_read_latency_seconds_count", source=source) == want, source
            buckets = sorted((float(dict(labels)["le"]), v) for (name, labels), v in samples.items()
                             if name == "hubfs_read_latency_seconds_bucket" and ("source", source) in labels)
            assert [le for le, _ in buckets][-1] == float("inf") and buckets[-1][1] == want, buckets
            assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:])), buckets
            assert len(buckets) == len(status["latency"][source]["le"]) + 1
            assert value(samples, "hubfs_read_latency_seconds_sum", source=source) >= 0
        assert not any(n.startswith("hubfs_read_latency") and ("source", "shared") in labels
                       for n, labels in samples)
    assert value(scraped, "hubfs_read_latency_seconds_sum", source="cdn") > 0
    # Anything but /metrics is a 404.
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://{address}/", timeout=10)
    assert e.value.code == 404


def test_metrics_address_refused_with_the_accepted_forms(hub, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([HUBFS, "mount", "--endpoint", hub["endpoint"], "--cache-dir", str(tmp_path / "cache"),
                        "--metrics", "localhost:http", REPO, str(mnt)], capture_output=True, text=True, env=ENV)
    assert r.returncode != 0
    assert "ADDRESS:PORT" in r.stderr
    assert _mounted(mnt) is None


def test_log_format_json_gives_one_object_per_line_with_stable_fields(hub, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "hubfs.log"
    r = subprocess.run([HUBFS, "mount", "--endpoint", hub["endpoint"], "--cache-dir", str(tmp_path / "cache"),
                        "--log-format", "json", "--log-file", str(log), REPO, str(mnt)],
                       capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, r.stderr
    try:
        assert (mnt / "note.txt").read_text() == "a small file\n"
        assert not os.path.exists(mnt / "no such file")
    finally:
        assert subprocess.run([HUBFS, "unmount", str(mnt)]).returncode == 0
    # The daemon has exited (hubfs unmount waits for it): the log is complete.
    lines = log.read_text().splitlines()
    assert len(lines) >= 2, lines  # at least "mounting ..." and "unmounting"
    for line in lines:
        entry = json.loads(line)
        assert set(entry) == {"time", "level", "program", "pid", "message"}, entry
        assert entry["level"] in ("debug", "info", "warning", "error") and entry["program"] == "hubfs"
        assert entry["time"].endswith("Z") and isinstance(entry["pid"], int)
    messages = [json.loads(line)["message"] for line in lines]
    assert any(m.startswith("mounting ") and "lab/admin" in m for m in messages), messages
    assert "unmounting" in messages
