"""Running the server: command-line options, the shared state, TLS, the two listeners (API and
CDN origins, each a threading HTTP server), the one "listening" line on stdout, and stopping on
SIGTERM/SIGINT (or stdin EOF)."""

import argparse
import http.server
import os
import signal
import socket
import ssl
import sys
import threading

from .faults import FaultTable
from .handler import Handler
from .quotas import QuotaTable, parse_quota_spec
from .routes_api import ApiRoutes
from .routes_cdn import CdnRoutes
from .routes_control import ControlRoutes
from .routes_plain import PlainRoutes
from .shaping import Shaping
from .signing import URL_STYLES, UrlSigner
from .stats import RefusedRanges, Stats
from .store import BlobRegistry, DigestCache, RepoStore
from .xet import XetAuth, XetStore

# Whether xorb URLs are signed for exactly their ranges and other Ranges refused (and counted,
# failing the test that sent them: tests/support/local_hub.cc, tests/python/local_hub.py) when
# --strict-xet-ranges is not given. THE one switch for the whole suite, the benchmarks and the
# demo: "on", as the live service signs (docs/hub-http-contract.md section 7b); "off" only to try an
# older client that still asks for xorb footers.
STRICT_XET_RANGES_DEFAULT = "on"

# The listen backlog: benchmarks open many connections at once and a short queue would turn
# that burst into SYN retries (1 s each) that look like server latency.
LISTEN_BACKLOG = 1024


class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG
    allow_reuse_address = True

    tls_context = None  # an ssl.SSLContext with --tls-cert

    def get_request(self):
        sock, addr = super().get_request()
        if self.tls_context is not None:
            # The handshake happens in the handler's thread (Handler.setup), never in this accept
            # loop, where one silent client would hold up every other connection.
            sock = self.tls_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        # Clients hanging up mid-body (a cancelled read, a timeout) are routine, not errors.
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, socket.timeout, TimeoutError)):
            return
        super().handle_error(request, client_address)


class ApiHandler(ControlRoutes, ApiRoutes, PlainRoutes, Handler):
    origin = "api"


class CdnHandler(CdnRoutes, Handler):
    origin = "cdn"


class ServerState:
    """Everything the handlers of both origins share."""

    def __init__(self, args):
        self.store = RepoStore(os.path.abspath(args.root), args.lfs_threshold, DigestCache())
        self.blobs = BlobRegistry()
        self.signer = UrlSigner(args.url_ttl, args.url_style)
        self.quotas = QuotaTable(args.quota, args.quota_window)
        self.redirect_chain = args.redirect_chain
        self.resolve_cache = args.resolve_cache
        self.stats = Stats()
        self.faults = FaultTable()
        self.shaping = Shaping(args.latency_ms, args.bandwidth_mbps, args.host_mbps)
        self.page_size = args.page_size
        self.tokens = set(args.token or [])
        self.tokens_no_access = set(args.token_no_access or [])
        self.verbose = args.verbose
        self.api_url = None
        self.cdn_url = None
        # The Xet model (xet.py): None unless --xet.
        self.xet = XetStore(args.xet_pack, args.xet_store, args.xet_max_xorb_bytes) if args.xet else None
        self.xet_auth = XetAuth(args.xet_token_ttl, args.url_ttl)
        self.strict_xet_ranges = args.strict_xet_ranges == "on"
        self.refused_ranges = RefusedRanges()
        self.store.xet = self.xet


def parse_args(argv):
    p = argparse.ArgumentParser(description="Local Hugging Face Hub stand-in for hubfs tests and benchmarks.")
    p.add_argument("--root", required=True, help="directory holding {models,datasets,spaces}/<org>/<name>/")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="Hub API port (0: pick a free one)")
    p.add_argument("--cdn-port", type=int, default=0, help="CDN port (0: pick a free one)")
    p.add_argument("--latency-ms", type=float, default=0, help="delay before answering every request")
    p.add_argument("--bandwidth-mbps", type=float, default=0,
                   help="per-connection body rate in megabits/s (0: unlimited, uses sendfile)")
    p.add_argument("--host-mbps", type=float, default=0,
                   help="host-wide body rate in megabits/s, shared by every connection of both "
                        "origins (one token bucket, on top of --bandwidth-mbps), as a shared NIC or "
                        "a metered egress; 0: none. Bodies are paced (no sendfile) when it is set")
    p.add_argument("--url-ttl", type=int, default=3600, help="seconds a signed CDN URL stays valid")
    p.add_argument("--page-size", type=int, default=1000, help="most tree entries per page")
    p.add_argument("--token", action="extend", nargs="+",
                   help="tokens accepted for private/gated repos (--token A B or --token A --token B)")
    p.add_argument("--token-no-access", action="extend", nargs="+",
                   help="valid tokens that open no private or gated repo (any other token is "
                        "refused: 401 Invalid credentials in Authorization header)")
    p.add_argument("--quota", type=parse_quota_spec, default={},
                   help="requests per window and caller, e.g. api=30,resolvers=200 (buckets: api, "
                        "resolvers); every counted answer carries RateLimit and RateLimit-Policy; "
                        "over quota: 429 until the window resets. Default: no quotas")
    p.add_argument("--quota-window", type=int, default=300, help="seconds per fixed quota window (Hub: 300)")
    p.add_argument("--url-style", choices=URL_STYLES, default="local",
                   help="how signed CDN URLs are spelled: local (expires=&sig=), s3 (X-Amz-*), "
                        "cloudfront (Expires=&Signature=&Key-Pair-Id=)")
    p.add_argument("--redirect-chain", action="store_true",
                   help="resolve of an LFS file answers a relative 307 on the Hub first, which then "
                        "redirects to the CDN: two hops")
    p.add_argument("--resolve-cache", action="store_true",
                   help="resolve of a small (non-LFS) file answers a relative 307 to "
                        "/api/resolve-cache/{t}/{org}/{name}/{sha}/{path}?...&etag=..., which answers the "
                        "bytes, as the Hub does; both hops are resolver calls")
    p.add_argument("--lfs-threshold", type=int, default=10240, help="files this big or bigger are LFS")
    p.add_argument("--exit-on-stdin-eof", action="store_true",
                   help="exit when stdin closes (the launcher holds the other end, so the server "
                        "dies with the test process even if it crashes)")
    p.add_argument("--xet", action="store_true",
                   help="LFS files are Xet-stored: xetHash in listings, xet-read-token, the CAS "
                        "reconstruction API (v1, v2) and xorbs on the CDN origin (xet.py)")
    p.add_argument("--xet-pack", help="the hubfs-xet-pack binary (build/bin/hubfs-xet-pack) that packs files")
    p.add_argument("--xet-store", help="directory for xorbs and the chunk index (default: a temporary one)")
    p.add_argument("--xet-max-xorb-bytes", type=int, default=0,
                   help="cut xorbs at this many content bytes (default: xet-core's 64 MiB)")
    p.add_argument("--strict-xet-ranges", choices=("on", "off"), default=STRICT_XET_RANGES_DEFAULT,
                   help="on: every xorb URL (V1 and V2) is signed for its listed byte ranges and a "
                        "Range that is neither one of them nor exactly all of them is refused with "
                        "403 and counted (GET /_hubfs/refused-ranges), as the service does; off: V1 "
                        "URLs open the whole xorb and V2 ones any Range inside a listed range "
                        "(default: %(default)s, STRICT_XET_RANGES_DEFAULT in server.py)")
    p.add_argument("--xet-token-ttl", type=int, default=3600, help="seconds a Xet read token stays valid")
    p.add_argument("--verbose", action="store_true", help="log every request to stderr")
    p.add_argument("--tls-cert", help="PEM certificate (chain) to serve both origins over https")
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")
    args = p.parse_args(argv)
    if args.quota_window < 1:
        p.error("--quota-window must be >= 1")
    if args.bandwidth_mbps < 0 or args.host_mbps < 0:
        p.error("--bandwidth-mbps and --host-mbps take a rate >= 0 (0: no limit)")
    if args.page_size < 1:
        p.error("--page-size must be >= 1")
    if bool(args.tls_cert) != bool(args.tls_key):
        p.error("--tls-cert and --tls-key go together")
    if not os.path.isdir(args.root):
        p.error("--root %s is not a directory" % args.root)
    return args


def main(argv):
    args = parse_args(argv)
    state = ServerState(args)
    servers = []
    tls_context = None
    if args.tls_cert:
        tls_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls_context.load_cert_chain(args.tls_cert, args.tls_key)
        tls_context.set_alpn_protocols(["http/1.1"])
    for port, handler in ((args.port, ApiHandler), (args.cdn_port, CdnHandler)):
        server = QuietServer((args.host, port), handler)
        server.state = state
        server.tls_context = tls_context
        servers.append(server)
    scheme = "https" if tls_context else "http"
    state.api_url = "%s://%s:%d" % (scheme, args.host, servers[0].server_address[1])
    state.cdn_url = "%s://%s:%d" % (scheme, args.host, servers[1].server_address[1])

    # SIGTERM/SIGINT are blocked in every thread and taken synchronously by the main thread,
    # so a stop is immediate instead of waiting for some thread to notice a flag.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    if args.exit_on_stdin_eof:
        def watch_stdin():
            while sys.stdin.buffer.read(4096):
                pass
            os.kill(os.getpid(), signal.SIGTERM)
        threading.Thread(target=watch_stdin, daemon=True).start()

    sys.stdout.write("listening %s cdn %s\n" % (state.api_url, state.cdn_url))
    sys.stdout.flush()
    signal.sigwait(stop_signals)
    for server in servers:
        server.server_close()
    if state.xet is not None:
        state.xet.close()
    sys.stderr.flush()
    # Handler threads may be mid-sendfile or asleep in a latency/stall; nothing they hold needs
    # cleaning up, so leave without waiting for them.
    os._exit(0)
