"""Traffic shaping: the per-request latency (--latency-ms), the per-connection bandwidth limit
(--bandwidth-mbps) and the host-wide one (--host-mbps) that file bodies are paced to; bodies
go out by sendfile (paced ones slice by slice) unless the socket is TLS."""

import os
import ssl
import threading
import time

# Paced (bandwidth-limited) bodies are written in slices of about this much wall time.
PACING_INTERVAL_S = 0.02
# A body's slice when it is not paced: what one sendfile moves, and so what its byte count moves by
# (a paced body's is smaller: Shaping.slice_size).
COPY_SLICE = 1 << 20
# A body's last slice is written after the request leaves the in-flight count (see mark_done);
# small, so the time a request is uncounted is short.
LAST_SLICE = 64 << 10


def mbps_to_bytes_per_s(mbps):
    """Megabits per second, as links are rated, to bytes per second."""
    return mbps * 1000 * 1000 / 8


class HostBucket:
    """The host-wide limit (--host-mbps): one token bucket every connection's paced body writes
    draw from, as a shared NIC or a metered egress would be, on top of each connection's own
    limit. Thread-safe. Kept as a virtual clock: `_free_at` is when the bytes booked so far
    have gone out at the host's rate; a slice is booked after them, in the order the writers
    ask (first come, first served, so concurrent connections share the rate about evenly).
    An idle host banks at most `burst_s` of its rate, so a burst after a pause is short."""

    def __init__(self, bytes_per_s, burst_s=PACING_INTERVAL_S, clock=time.monotonic, sleep=time.sleep):
        if bytes_per_s <= 0:
            raise ValueError("a host bucket needs a positive rate, not %r" % bytes_per_s)
        self.bytes_per_s = bytes_per_s
        self.burst_s = burst_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._free_at = float("-inf")

    def book(self, n):
        """Books n bytes; returns the clock time at which they may be written (the start of
        their share of the host's time, so a slice goes out whole at the start of its slot, as
        the per-connection pacing does)."""
        with self._lock:
            start = max(self._free_at, self._clock() - self.burst_s)
            self._free_at = start + n / self.bytes_per_s
            return start

    def take(self, n):
        """Books n bytes and waits until they may be written. The wait is outside the lock."""
        wait = self.book(n) - self._clock()
        if wait > 0:
            self._sleep(wait)


class Shaping:
    """The configured latency and bandwidths."""

    def __init__(self, latency_ms, bandwidth_mbps, host_mbps=0):
        self.latency_s = latency_ms / 1000.0
        self.bytes_per_s = mbps_to_bytes_per_s(bandwidth_mbps)  # per connection; 0: unlimited
        self.host = HostBucket(mbps_to_bytes_per_s(host_mbps)) if host_mbps else None

    def delay(self):
        """Holds a (counted, non-control) request for the configured latency."""
        if self.latency_s:
            time.sleep(self.latency_s)

    def paces_bodies(self):
        """Whether bodies are paced (either limit set) rather than sent by sendfile."""
        return bool(self.bytes_per_s) or self.host is not None

    def slice_size(self):
        """Bytes per paced write: about PACING_INTERVAL_S at the tighter of the two limits."""
        rates = [r for r in (self.bytes_per_s, self.host.bytes_per_s if self.host else 0) if r]
        return max(4096, min(COPY_SLICE, int(min(rates) * PACING_INTERVAL_S)))


class BodyCopy:
    """Handler mixin: writing a file body at the configured rates."""

    def _copy_body(self, f, offset, count):
        """Writes count bytes of f from offset; returns how many went out. The last slice goes out
        after mark_done() (see there), and its bytes are counted before they are written, so
        stats read right after a response already include all of it."""
        state = self.server.state
        shaping = state.shaping
        if not shaping.paces_bodies():
            # sendfile: the kernel copies page cache to socket; Python never touches the bytes,
            # which is what lets this server outrun the client it is benchmarking.
            # Counted slice by slice as they go out, not once the body ends: a client that stops
            # reading a long range (rclone's open-ended stream when the file closes) leaves this
            # call blocked until its connection goes, and a count taken meanwhile must already
            # hold what it received (peer_bench.py's over-read column showed 0 MB for it).
            last = min(count, LAST_SLICE)
            sent = 0
            while sent < count - last:
                n = min(COPY_SLICE, count - last - sent)
                wrote = self._sendfile(f, offset + sent, n)
                state.stats.add("bytes_sent", wrote)
                sent += wrote
                if wrote < n:
                    return sent
            state.stats.add("bytes_sent", last)
            self.mark_done()
            tail = self._sendfile(f, offset + sent, last)
            state.stats.add("bytes_sent", tail - last)  # whatever did not make it
            return sent + tail
        rate = shaping.bytes_per_s
        slice_size = shaping.slice_size()
        # A paced slice goes out by sendfile too, on a plain socket: the server stands in for the
        # Hub, whose CPU is not on the client's cores, and reading each slice into Python and
        # writing it back (two copies and a fresh buffer per MB) took a benchmark's CPU from the
        # clients it measures. Under TLS the bytes must pass through the TLS layer: read, write.
        by_sendfile = not isinstance(self.connection, ssl.SSLSocket)
        start = time.monotonic()
        sent = 0
        while sent < count:
            n = min(slice_size, count - sent)
            block = None
            if not by_sendfile:
                block = os.pread(f.fileno(), n, offset + sent)
                n = len(block)
                if not n:
                    break
            if shaping.host is not None:
                # Before the in-flight bookkeeping below: a request waiting for the host's
                # bandwidth is still in flight.
                shaping.host.take(n)
            state.stats.add("bytes_sent", n)
            if sent + n == count:
                self.mark_done()
            if block is not None:
                self.wfile.write(block)
                wrote = n
            else:
                wrote = self._sendfile(f, offset + sent, n)
                if wrote < n:
                    # The file shrank or the client went: the bytes counted above did not go.
                    state.stats.add("bytes_sent", wrote - n)
                    return sent + wrote
            sent += wrote
            if rate:
                ahead = start + sent / rate - time.monotonic()
                if ahead > 0 and sent < count:
                    time.sleep(ahead)
        return sent

    def _sendfile(self, f, offset, count):
        sent = 0
        while sent < count:
            try:
                n = self.connection.sendfile(f, offset + sent, count - sent)
            except OSError:
                self.close_connection = True
                break
            if n == 0:
                break  # the file shrank under us
            sent += n
        return sent
