#!/usr/bin/env bash
# The Debian package end to end, as root (what CI runs after the other tests, scripts/test.sh):
# builds it from the programs already in build/ (scripts/package.sh), runs lintian on it,
# installs it with `apt-get install ./hubfs_*.deb`, checks each thing it promises with nothing
# set up by hand (no PATH, PYTHONPATH or HDF5_PLUGIN_PATH), purges it and checks nothing is left.
# Prints one line per check and, last, "N passed, M failed"; exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD
build=$(realpath -m "${BUILD_DIR:-build}")

if [ "$(id -u)" -ne 0 ]; then
  echo "package_test.sh: run it as root (it installs and purges the package)" >&2
  exit 2
fi
if dpkg-query -W -f='${Status}' hubfs 2>/dev/null | grep -q "ok installed"; then
  echo "package_test.sh: a hubfs package is installed already; it would be purged: apt-get purge hubfs first" >&2
  exit 2
fi

work=$(mktemp -d /tmp/hubfs-package-test.XXXXXX)
server_pid=""
cleanup() {
  for m in "$work/mnt-fstab" "$work/mnt-type"; do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m"
  done
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  if dpkg-query -W -f='${Status}' hubfs 2>/dev/null | grep -q "ok installed"; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -q hubfs >/dev/null 2>&1
  fi
  rm -rf "$work"
}
trap cleanup EXIT

passed=0
failed=0
log="$work/check.log"
# check NAME COMMAND...: runs it, prints ok or FAIL (with the end of its output).
check() {
  local name=$1 started=$SECONDS
  shift
  if "$@" >"$log" 2>&1; then
    passed=$((passed + 1))
    echo "ok    $name ($((SECONDS - started)) s)"
  else
    failed=$((failed + 1))
    echo "FAIL  $name ($((SECONDS - started)) s)"
    tail -n 25 "$log" | sed 's/^/      /'
  fi
}
finish() {
  echo "package test: ${SECONDS}s"
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}
# What the checks run with: no PATH beyond the system's, nothing pointing into the build.
clean_env=(env -i HOME=/root LANG=C.UTF-8 PATH=/usr/sbin:/usr/bin:/sbin:/bin HF_HUB_DISABLE_IMPLICIT_TOKEN=1)

# --- build and lint -------------------------------------------------------------------------------
deb=""
build_package() {
  deb=$(HUBFS_PACKAGE_NO_BUILD=1 HUBFS_DEB_DIR="$work" ./scripts/package.sh | tail -n 1) && [ -f "$deb" ]
}
check "package.sh builds the package from $build" build_package
[ -f "$deb" ] || finish
dpkg-deb --info "$deb" | sed -n 's/^ \(Package\|Version\|Depends\|Installed-Size\):/  \1:/p'
lint() {
  lintian --fail-on error --tag-display-limit 0 "$deb" 2>&1 | grep -v "running with root privileges" >"$work/lintian.txt"
  cat "$work/lintian.txt"
  ! grep -q '^E:' "$work/lintian.txt"
}
check "lintian reports no errors" lint
echo "      lintian: $(grep -c '^E:' "$work/lintian.txt") errors, $(grep -c '^W:' "$work/lintian.txt") warnings"
sed 's/^/      /' "$work/lintian.txt"

# --- what the checks read: a local Hub repo with a text file and Zstd- and LZF-compressed HDF5 ------
repo="$work/hub/datasets/lab/pkg"
mkdir -p "$repo" "$work/mnt-fstab" "$work/mnt-type"
echo "read through an fstab line" >"$repo/note.txt"
make_hdf5() {
  /usr/bin/python3 - "$work" <<'EOF'
import sys, h5py, numpy as np
work = sys.argv[1]
data = np.arange(20000, dtype="<i4").reshape(100, 200)
data.tofile(f"{work}/expected.bin")
with h5py.File(f"{work}/plain.h5", "w") as f:
    f.create_dataset("x", data=data, chunks=(10, 50))
EOF
  HDF5_PLUGIN_PATH="$build/plugins" h5repack -f UD=32015,0,1,3 "$work/plain.h5" "$repo/zstd.h5" &&
    HDF5_PLUGIN_PATH="$build/plugins" h5repack -f UD=32000,0,0 "$work/plain.h5" "$repo/lzf.h5"
}
check "test files: HDF5 datasets compressed with Zstd (32015) and LZF (32000)" make_hdf5
# h5dump writes the dataset's raw little-endian elements: compared byte for byte.
h5dump_reads() {  # FILE
  rm -f "$work/dumped.bin"
  "${clean_env[@]}" h5dump -d /x -b LE -o "$work/dumped.bin" "$1" && cmp "$work/dumped.bin" "$work/expected.bin"
}
h5dump_fails() { ! h5dump_reads "$1"; }
# Controls: before the install, libhdf5 finds no Zstd or LZF plugin of its own here (else the
# checks after it would prove nothing).
check "before the install, h5dump cannot read the Zstd dataset (control)" h5dump_fails "$repo/zstd.h5"
check "before the install, h5dump cannot read the LZF dataset (control)" h5dump_fails "$repo/lzf.h5"

# --- install ---------------------------------------------------------------------------------------
install_package() {
  (cd "$work" && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "./$(basename "$deb")")
}
check "apt-get install ./$(basename "$deb")" install_package
dpkg -L hubfs | sort >"$work/files.txt"

check "hubfs and h5chunk in /usr/bin" bash -c '[ "$(command -v hubfs)" = /usr/bin/hubfs ] && [ "$(command -v h5chunk)" = /usr/bin/h5chunk ] && hubfs --version && h5chunk --help >/dev/null'
check "declared dependencies (fuse3, libfuse3, libhdf5, python3)" bash -c \
  'dpkg-query -W -f="\${Depends}\n" hubfs | tee /dev/stderr | grep -q "fuse3," && dpkg-query -W -f="\${Depends}" hubfs | grep -q "libfuse3-3" && dpkg-query -W -f="\${Depends}" hubfs | grep -q "libhdf5" && dpkg-query -W -f="\${Depends}" hubfs | grep -q "python3 "'

# A local Hub for the mounts.
/usr/bin/python3 tools/hub_server.py --root "$work/hub" --host 127.0.0.1 >"$work/server.out" 2>"$work/server.err" &
server_pid=$!
endpoint=""
for _ in $(seq 100); do
  endpoint=$(awk '$1 == "listening" {print $2}' "$work/server.out")
  [ -n "$endpoint" ] && break
  sleep 0.1
done
fstab_mount() {
  printf 'datasets/lab/pkg %s fuse.hubfs _netdev,nofail,endpoint=%s,cache_dir=%s 0 0\n' \
    "$work/mnt-fstab" "$endpoint" "$work/cache" >"$work/fstab"
  "${clean_env[@]}" PATH=/nonexistent /usr/bin/mount --fstab "$work/fstab" "$work/mnt-fstab" &&
    findmnt -n -o FSTYPE "$work/mnt-fstab" | grep -qx fuse.hubfs &&
    cmp "$work/mnt-fstab/note.txt" "$repo/note.txt" &&
    h5dump_reads "$work/mnt-fstab/zstd.h5"
}
check "an fstab line mounts the repo (mount --fstab, no PATH given)" fstab_mount
type_mount() {
  "${clean_env[@]}" PATH=/nonexistent /usr/bin/mount -t fuse.hubfs -o "endpoint=$endpoint,cache_dir=$work/cache" \
    datasets/lab/pkg "$work/mnt-type" && cmp "$work/mnt-type/note.txt" "$repo/note.txt"
}
check "mount -t fuse.hubfs mounts the repo (no PATH given)" type_mount
unmount_both() { "${clean_env[@]}" hubfs unmount "$work/mnt-fstab" && "${clean_env[@]}" /usr/bin/umount "$work/mnt-type"; }
check "hubfs unmount and umount unmount them" unmount_both

python_imports() {
  (cd / && "${clean_env[@]}" /usr/bin/python3 -c '
import h5chunk, hubfs
print(h5chunk.__file__, hubfs.__file__, hubfs.find_program())
assert h5chunk.__file__.startswith("/usr/lib/python3/dist-packages/"), h5chunk.__file__
assert hubfs.__file__.startswith("/usr/lib/python3/dist-packages/"), hubfs.__file__
')
}
check "python3 -c 'import h5chunk, hubfs' from / with no PYTHONPATH" python_imports
python_fsspec_protocol() {
  # fsspec finds "hubfs" through the package's entry point (hubfs-*.dist-info), hubfs not imported.
  (cd / && "${clean_env[@]}" /usr/bin/python3 -c '
import sys, fsspec
cls = fsspec.get_filesystem_class("hubfs")
assert cls.__module__ == "hubfs._fsspec", cls
import hubfs
print(cls.__name__, "from", hubfs.__file__)
')
}
check "fsspec finds the hubfs protocol from the package's metadata" python_fsspec_protocol
python_reads() {
  (cd / && "${clean_env[@]}" /usr/bin/python3 -c '
import sys, numpy as np, h5chunk
work = sys.argv[1]
a = h5chunk.File(work + "/hub/datasets/lab/pkg/zstd.h5")["x"][:]
assert (a == np.fromfile(work + "/expected.bin", dtype="<i4").reshape(100, 200)).all()
print("h5chunk read", a.shape)
' "$work")
}
check "the h5chunk Python package reads the Zstd dataset" python_reads
check "h5dump reads the Zstd dataset through the plugins (no HDF5_PLUGIN_PATH)" h5dump_reads "$repo/zstd.h5"
check "h5dump reads the LZF dataset through the plugins (no HDF5_PLUGIN_PATH)" h5dump_reads "$repo/lzf.h5"
man_pages() {
  "${clean_env[@]}" MANPAGER=cat MANWIDTH=100 man hubfs >"$work/man.txt" &&
    grep -q -- "--cache-dir" "$work/man.txt" && grep -q -- "--read-timeout" "$work/man.txt" &&
    grep -q "hubfs cache prune" "$work/man.txt" &&
    "${clean_env[@]}" MANPAGER=cat man h5chunk | grep -q -- "--route"
}
check "man hubfs and man h5chunk show the options" man_pages
completion() {
  local f=/usr/share/bash-completion/completions/hubfs
  [ -f "$f" ] && [ -f /usr/share/bash-completion/completions/h5chunk ] &&
    bash -c 'source '"$f"'; COMP_WORDS=(hubfs mou); COMP_CWORD=1; _hubfs; [ "${COMPREPLY[*]}" = mount ] &&
             COMP_WORDS=(hubfs mount --cache-); COMP_CWORD=2; _hubfs; [ "${COMPREPLY[*]}" = "--cache-dir --cache-size" ] &&
             COMP_WORDS=(hubfs cache pr); COMP_CWORD=2; _hubfs; [ "${COMPREPLY[*]}" = prune ]'
}
check "bash completion completes commands and options" completion
unit_file() {
  local u=/lib/systemd/system/hubfs@.service
  [ -f "$u" ] && grep -q '^ExecStart=/usr/bin/hubfs mount --foreground' "$u" &&
    { ! command -v systemd-analyze >/dev/null || systemd-analyze verify "$u"; }
}
check "the systemd unit template hubfs@.service" unit_file

# --- purge -----------------------------------------------------------------------------------------
# dpkg, not apt-get: the same removal and purge, without apt reading its package lists again.
purge_package() { DEBIAN_FRONTEND=noninteractive dpkg --purge hubfs; }
check "dpkg --purge hubfs" purge_package
nothing_left() {
  local left=0 f
  while read -r f; do
    [ -d "$f" ] && continue  # directories the system has anyway (/usr/bin, ...)
    if [ -e "$f" ] || [ -L "$f" ]; then echo "left behind: $f"; left=1; fi
  done <"$work/files.txt"
  for d in /usr/lib/python3/dist-packages/hubfs /usr/lib/python3/dist-packages/h5chunk /usr/share/doc/hubfs /etc/hubfs; do
    [ -e "$d" ] && { echo "left behind: $d"; left=1; }
  done
  [ -d "$work/cache" ] || { echo "the user's cache ($work/cache) should stay"; left=1; }
  [ "$left" = 0 ]
}
check "purge leaves nothing behind but the user's cache" nothing_left
check "after the purge, h5dump cannot read the Zstd dataset again" h5dump_fails "$repo/zstd.h5"
finish
