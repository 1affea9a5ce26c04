"""A local stand-in for the Hugging Face Hub, so hubfs tests, the demo and the benchmarks run
offline. It serves repos from a directory tree over two origins, as the real Hub does:

  * the Hub API origin: repo info, tree listing, paths-info, resolve (small files inline,
    LFS files as a 302 to a signed CDN URL), and test control under /_hubfs/;
  * a separate "CDN" origin on a second port (a different host:port, so a client that forwards
    Authorization across hosts is caught): signed, expiring /blobs/<sha256> URLs with ranges.

The contract is docs/hub-http-contract.md. Debian's /usr/bin/python3 standard library
only. Started by tools/hub_server.py; run that with --help for options. On start it prints
exactly one line to stdout:
  listening http://HOST:PORT cdn http://HOST:CDNPORT
(https:// for both with --tls-cert/--tls-key: both origins then speak TLS with that certificate,
HTTP/1.1 only, and /_hubfs/stats counts tls_handshakes, tls_handshake_failures and, of those,
tls_refused_by_client: the ones the client ended with an alert, refusing the certificate).

Repo layout under --root: <root>/{models,datasets,spaces}/<org>/<name>/ holding either plain
files (one commit on branch "main"), or a hub.json plus snapshots/<commit>/ directories:
  {"refs": {"main": "c2", "v1": "c1", "refs/pr/1": "c1"},
   "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}, "c2": {"date": "..."}},
   "private": false, "gated": false}
A hub.json may also carry "listed_sizes": {"<path>": <any JSON value>}: listings and paths-info
then give that file that size (hostile listings: -1, "12", 1.5, 2**63-1; see listed_sizes.py).
A repo that was renamed is a directory with just a hub.json {"moved_to": "org/new-name"}:
every request for it answers 307 with a relative Location naming the new id.
Revisions: refs names (one percent-encoded segment, e.g. refs%2Fpr%2F1) or a commit's sha,
sha1("<org>/<name>:<commit name>"). A plain repo's sha hashes its files' paths, sizes and
mtimes; it is recomputed on every repo-info request. A file is LFS when it is at least
--lfs-threshold bytes or named *.h5/.hdf5/.bin/.safetensors/.npy.

API origin:
  GET  /api/{models|datasets|spaces}/{org}/{name}[/revision/{rev}]      repo info
  GET  /api/{t}/{org}/{name}/tree/{rev}[/{path}]?recursive=&limit=&cursor=  one page, Link next
  POST /api/{t}/{org}/{name}/paths-info/{rev}   form paths=a&paths=b (or JSON {"paths": []})
  GET|HEAD /[datasets/|spaces/]{org}/{name}/resolve/{rev}/{path}   200/206/416, or 302 to CDN
       (with --redirect-chain: first a relative 307 to /api/resolve-chain/{t}/{org}/{name}/{sha}/{path},
       which answers the 302: two hops; with --resolve-cache, a small file's resolve answers a
       relative 307 to /api/resolve-cache/{t}/{org}/{name}/{sha}/{path}?<original path>=&etag=..., which
       answers the bytes, as the Hub does). With --xet and Accept: application/vnd.xet-fileinfo+json,
       a Xet file's resolve answers 200 with its Xet description (X-Xet-Hash, X-Linked-Size, Link
       rel="xet-auth" and rel="xet-reconstruction-info") instead of the 302, as huggingface.js asks
  GET|HEAD /[datasets/|spaces/]{org}/{name}/raw/{rev}/{path}   the file as git stores it (an LFS
       file's pointer), no redirect. The revision HEAD is the default branch, everywhere.
  GET|HEAD /_plain/{models|datasets|spaces}/{org}/{name}/{rev}/[{path}]   the plain HTTP view:
       a directory (trailing slash) is an HTML index of links, a file is its bytes with Range
       (206/416), Last-Modified the commit date, no redirect. For peers that only speak plain
       HTTP (rclone's http backend); delayed and bandwidth-limited like every data request.
  GET  /_hubfs/stats   GET /_hubfs/trace   POST /_hubfs/reset   POST /_hubfs/expire
  GET  /_hubfs/quotas  (the current window's use per bucket and caller, and 429s answered)
  GET  /_hubfs/health
  GET  /_hubfs/refused-ranges   POST /_hubfs/refused-ranges/expect   (xorb Ranges refused under
       --strict-xet-ranges on, kept across resets; "expect": the test sends them on purpose)
  GET|POST|DELETE /_hubfs/faults   (POST a fault object or a list of them; see Faults)
CDN origin:
  GET|HEAD /blobs/{sha256}?<signature>   200/206/416; 403 expired or bad signature. The
       signature is spelled as --url-style says: expires=&sig=, S3's X-Amz-*, or CloudFront's
       Expires=&Signature=&Key-Pair-Id= (signing.py)
Xet (--xet --xet-pack build/bin/hubfs-xet-pack; xet.py has the details): LFS files are
Xet-stored, packed by hubfs-xet-pack into one store shared by every revision (dedup):
  listings and paths-info carry "xetHash"; resolve adds X-Xet-Hash and Link rel="xet-auth"
  GET  /api/{t}/{org}/{name}/xet-read-token/{rev}   {"accessToken", "exp", "casUrl"} (+ X-Xet-*)
  CDN origin: GET /v1|v2/reconstructions/{xetHash}  (Bearer token, Range in file coordinates)
              GET /xorbs/default/{xorb}?expires=&X-Xet-Signed-Range=bytes=a-b[,...]&sig=
                  --strict-xet-ranges on (as the service): V1 and V2 URLs list their ranges, and
                  the Range must be one of them or exactly all of them (multipart/byteranges);
                  anything else is 403, counted in /_hubfs/refused-ranges. off: V1 URLs open the
                  whole xorb, V2 ones any Range inside a listed range
  A Xet-aware resolve (Accept: application/vnd.xet-fileinfo+json) answers 200 with the file's
  Xet description instead of the 302 (huggingface.js fileDownloadInfo)
Control requests are neither counted nor delayed by --latency-ms.

Shaping (shaping.py): --latency-ms delays every counted request before it is answered;
--bandwidth-mbps paces each connection's file bodies (CDN blobs and xorbs, resolve, the plain
view) to that rate; --host-mbps paces the same bodies of all connections together to that rate
(one token bucket shared by both origins, first come first served, on top of the per-connection
limit: a shared NIC or a metered egress, where the host and not the connection is the limit).
With neither limit, bodies go out by sendfile. Small JSON and HTML answers are not paced.

As the real Hub: a token that is neither --token nor --token-no-access gets 401 "Invalid
credentials in Authorization header" on every request; a gated repo's info, listings and
README.md is open to anyone (the live Hub gates .gitattributes too), its other files answer 401 (no token) or 403 (a
token without access) with X-Error-Code: GatedRepo; with --quota, API calls and resolves are
counted per caller in fixed windows (quotas.py), every counted answer carries RateLimit and
RateLimit-Policy, and a spent quota answers 429 until its window resets.

Faults (faults.Fault has every key): each applies to the next "count" matching requests of
either origin and is exactly one of "status": N (a Hub-style error answer) or "mode": reset,
stall, ignore_range, bad_content_range, spurious_416, truncate or flip_byte; filters path_contains, origin,
method; "max_consecutive": k lets the same request through after k faulted in a row.

Stats (GET /_hubfs/stats, zeroed by POST /_hubfs/reset): requests, api_requests,
resolve_requests, cdn_requests, plain_requests, bytes_sent, peak_concurrency,
cdn_authorization_headers, range_requests, head_requests, faults_injected, tls_handshakes,
tls_handshake_failures, tls_refused_by_client, rate_limited, xet_token_requests, xet_reconstructions, xorb_requests,
xorb_bytes, xorb_authorization_headers, refused_ranges, in_flight, in_flight_seconds, by_path, by_status. Trace (GET
/_hubfs/trace, emptied by the same reset): one object per counted request, oldest first, at most
20000: begin and end (seconds since the reset), kind, method, path, range (the Range header) and status.

Modules, one job each:
  common.py          HubError, log, ISO dates, the plain view's prefix
  store.py           repos on disk: revisions, listing, git/LFS identities, served blobs
  signing.py         signed expiring CDN URLs (three spellings) and key rotation
  quotas.py          fixed-window quotas per bucket and caller, the RateLimit headers
  stats.py           the /_hubfs/stats counters
  faults.py          fault specs, the queue, max_consecutive streaks
  shaping.py         latency, per-connection and host-wide bandwidth
  handler.py         the shared request handler: dispatch, responses, faults, file bodies
  routes_api.py      API origin: repo info, tree, paths-info, resolve
  listed_sizes.py    hostile listings: sizes a hub.json puts in place of the real ones
  routes_plain.py    the plain HTTP view
  routes_cdn.py      CDN origin: signed blobs, and the Xet CAS routes
  xet.py             the Xet model: packing (hubfs-xet-pack), tokens, reconstructions, xorb URLs
  routes_control.py  /_hubfs/ test control
  server.py          options, TLS, the two listeners, main
"""
