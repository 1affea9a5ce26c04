#!/usr/bin/env bash
# core/fs links no transport, shared tier or Xet (issue 41; the stack is wired in core/stack):
# test_fs, which links hubfs_fs and what it needs, must hold no libcurl or libmemcached symbol
# and none of CurlTransport, MemcachedStore or the Xet code. The same check run on hubfs_net's
# archive, which holds CurlTransport, must fail: the pattern is not one that never matches.
# Includes too, which the link alone would not see: core/fs includes nothing of the stack, Xet,
# the shared tier or the curl transport, and core/cache (below Xet) nothing of Xet.
#
# Usage: check_fs_links_test.sh TEST_FS LIBHUBFS_NET SOURCE_DIR
set -euo pipefail
test_fs=$1
net_lib=$2
src=$3
pattern=' [TtUuWwVv] (curl_|memcached_|hubfs::CurlTransport|hubfs::MemcachedStore|hubfs::xet::)'

found() { nm -C "$1" 2>/dev/null | grep -E "$pattern" || true; }

linked=$(found "$test_fs")
if [ -n "$linked" ]; then
  echo "FAIL: $test_fs links what core/fs must not (wire it in core/stack instead):" >&2
  echo "$linked" | head -20 >&2
  echo "($(echo "$linked" | wc -l) symbols)" >&2
  exit 1
fi
if [ -z "$(found "$net_lib")" ]; then
  echo "FAIL: the check found nothing in $net_lib either, which holds CurlTransport: the pattern is broken" >&2
  exit 1
fi
upward=$(cd "$src" && {
  grep -nE '#include "(stack|xet|shared)/|#include "net/curl_transport\.h"' core/fs/*.h core/fs/*.cc || true
  grep -nE '#include "xet/' core/cache/*.h core/cache/*.cc || true
})
if [ -n "$upward" ]; then
  echo "FAIL: core/fs or core/cache includes what sits above it (wire it in core/stack, or move the header down):" >&2
  echo "$upward" >&2
  exit 1
fi
echo "check_fs_links: test_fs holds no curl_, memcached_, CurlTransport, MemcachedStore or xet:: symbol; core/fs and core/cache include nothing from above them"
