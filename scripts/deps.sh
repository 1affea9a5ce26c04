#!/usr/bin/env bash
# Installs every Debian 12 package hubfs needs to build, test and demo. Idempotent and
# non-interactive; skips apt entirely when everything is already there.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  lld  # the linker CMakeLists.txt picks: a fraction of ld.bfd's CPU per link, three builds of links in the suite
  clang libclang-rt-dev  # scripts/test.sh's sanitizer builds: LLVM's TSan runtime, ~0.6 of gcc's CPU in that pass
  libfuse3-dev fuse3
  libcurl4-openssl-dev libssl-dev
  libhdf5-dev hdf5-tools
  libblosc-dev libzstd-dev liblz4-dev zlib1g-dev
  liblzf-dev
  hdf5-filter-plugin hdf5-filter-plugin-blosc-serial
  libgtest-dev libgmock-dev
  libmemcached-dev memcached
  nlohmann-json3-dev libcli11-dev
  python3 python3-numpy python3-h5py curl bc openssl util-linux
  pybind11-dev python3-dev python3-pytest python3-tqdm
  python3-fsspec
  python3-torch  # tests/python/test_frames.py runs h5chunk.FrameDataset under torch's DataLoader
  python-tables-data
  rclone
  b3sum  # the BLAKE3 reference tool: tests/xet checks core/xet/blake3 against it
  nodejs  # the official JavaScript Hub client judges the local Hub (tests/npm)
  debhelper  # scripts/package.sh builds the Debian package with it
  lintian    # only for scripts/package_test.sh, which lints the package
  python3-prometheus-client  # tests/python/test_metrics.py parses the exposition with it
)
# npm: Debian's package, unless a Node.js that bundles its own npm is installed (NodeSource's
# nodejs does, and conflicts with Debian's npm package).
command -v npm >/dev/null || PACKAGES+=(npm)
# `./scripts/deps.sh --bench`: also what the benchmarks' contenders need (bench/*.py: the seed's
# remote path runs on fsspec's HTTP files, which need aiohttp and requests, and decodes with numcodecs).
if [ "${1:-}" = "--bench" ]; then
  PACKAGES+=(python3-aiohttp python3-requests python3-numcodecs)
fi

# One dpkg-query for all (one per package took seconds of the edit loop, ./scripts/test.sh --unit).
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null |
  awk '$2 == "install" && $3 == "ok" && $4 == "installed" {print $1}' || true)
missing=()
for p in "${PACKAGES[@]}"; do
  grep -qxF "$p" <<<"$installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
