#!/usr/bin/env bash
# Builds the Debian package, ./hubfs_VERSION_amd64.deb, from the programs in build/ (built first
# if missing or out of date; HUBFS_PACKAGE_NO_BUILD=1 takes build/ as it is). Install it with
#   apt-get install ./hubfs_*.deb
# debian/ describes the package; debian/rules installs from build/ and debhelper does the rest
# (why debhelper and not CPack: docs/usage.md, "The Debian package").
#   BUILD_DIR=DIR        package another build directory (default build)
#   HUBFS_DEB_DIR=DIR    write the .deb there (default: the repository's top directory)
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
build=$(realpath -m "${BUILD_DIR:-build}")
out=$(realpath -m "${HUBFS_DEB_DIR:-$top}")

missing=()
for tool in dh dpkg-deb dpkg-shlibdeps; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})); then
  echo "package.sh: ${missing[*]} not found: install debhelper and dpkg-dev (./scripts/deps.sh does)" >&2
  exit 1
fi
if [ "${HUBFS_PACKAGE_NO_BUILD:-0}" != 1 ]; then
  BUILD_DIR=$build BUILD_TARGETS="hubfs h5chunk_cli python hdf5_plugins" ./scripts/build.sh
fi
for f in bin/hubfs bin/h5chunk plugins/libhubfs_h5z_zstd.so plugins/libhubfs_h5z_lzf.so python/h5chunk/__init__.py; do
  [ -e "$build/$f" ] || { echo "package.sh: $build/$f is missing: build it (./scripts/build.sh)" >&2; exit 1; }
done

# debhelper works in debian/ (its stamps, the staged tree): a scratch copy keeps the checkout clean.
work="$build/package"
rm -rf "$work"
mkdir -p "$work" "$out"
cp -r debian "$work/"
version=$(dpkg-parsechangelog -l debian/changelog -S Version)
rm -f "$out/hubfs_${version}_"*.deb
# A package of what is on disk, reproducibly: file dates from the changelog's entry.
(cd "$work" && SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -l debian/changelog -S Timestamp) \
  HUBFS_BUILD_DIR="$build" HUBFS_DEB_DIR="$out" DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:-} noautodbgsym" \
  debian/rules binary) >"$work.log" 2>&1 || { cat "$work.log"; echo "package.sh: debian/rules binary failed (log: $work.log)" >&2; exit 1; }
deb=$(ls "$out/hubfs_${version}_"*.deb)
echo "$deb"
