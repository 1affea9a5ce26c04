"""Traffic shaping: the per-request latency (--latency-ms) and the per-connection bandwidth limit
(--bandwidth-mbps) that file bodies are paced to; unlimited bodies go out by sendfile."""

import os
import time

# Paced (bandwidth-limited) bodies are written in slices of about this much wall time.
PACING_INTERVAL_S = 0.02
# Chunk size when copying a file body without sendfile.
COPY_SLICE = 1 << 20
# A body's last slice is written after the request leaves the in-flight count (see mark_done);
# small, so the time a request is uncounted is short.
LAST_SLICE = 64 << 10


class Shaping:
    """The configured latency and bandwidth."""

    def __init__(self, latency_ms, bandwidth_mbps):
        self.latency_s = latency_ms / 1000.0
        # --bandwidth-mbps is megabits per second, as links are rated.
        self.bytes_per_s = bandwidth_mbps * 1000 * 1000 / 8

    def delay(self):
        """Holds a (counted, non-control) request for the configured latency."""
        if self.latency_s:
            time.sleep(self.latency_s)


class BodyCopy:
    """Handler mixin: writing a file body at the configured rate."""

    def _copy_body(self, f, offset, count):
        """Writes count bytes of f from offset; returns how many went out. The last slice goes out
        after mark_done() (see there), and its bytes are counted before they are written, so
        stats read right after a response already include all of it."""
        state = self.server.state
        rate = state.shaping.bytes_per_s
        if not rate:
            # sendfile: the kernel copies page cache to socket; Python never touches the bytes,
            # which is what lets this server outrun the client it is benchmarking.
            last = min(count, LAST_SLICE)
            sent = self._sendfile(f, offset, count - last)
            state.stats.add("bytes_sent", sent)
            if sent < count - last:
                return sent
            state.stats.add("bytes_sent", last)
            self.mark_done()
            tail = self._sendfile(f, offset + sent, last)
            state.stats.add("bytes_sent", tail - last)  # whatever did not make it
            return sent + tail
        slice_size = max(4096, min(COPY_SLICE, int(rate * PACING_INTERVAL_S)))
        start = time.monotonic()
        sent = 0
        while sent < count:
            block = os.pread(f.fileno(), min(slice_size, count - sent), offset + sent)
            if not block:
                break
            state.stats.add("bytes_sent", len(block))
            if sent + len(block) == count:
                self.mark_done()
            self.wfile.write(block)
            sent += len(block)
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
