"""`cmake --install build --component python` gives a working package outside the build tree."""

import os
import subprocess

import h5py
import numpy as np

from conftest import BUILD_DIR


def test_install_component_is_importable_elsewhere(tmp_path):
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", BUILD_DIR, "--component", "python", "--prefix", str(prefix)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    sites = [os.path.join(d, s) for d, subdirs, _ in os.walk(prefix) for s in subdirs if s == "h5chunk"]
    assert len(sites) == 1
    site = os.path.dirname(sites[0])
    probe = ("import h5chunk, hubfs, numpy as np, os, sys;"
             "assert h5chunk.__file__.startswith(sys.argv[1]), h5chunk.__file__;"
             "assert hubfs.find_program().startswith(sys.argv[1]);"
             "assert os.access(hubfs.find_program(), os.X_OK);"
             "print(h5chunk.File(sys.argv[2])['x'][2:4].tolist())")
    h5 = tmp_path / "x.h5"
    with h5py.File(h5, "w") as f:
        f.create_dataset("x", data=np.arange(10, dtype="int32"), chunks=(3,), compression="gzip")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HUBFS_BIN")}
    env["PYTHONPATH"] = site
    r = subprocess.run(["/usr/bin/python3", "-c", probe, site, str(h5)], capture_output=True, text=True,
                       env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[2, 3]"


def test_extensions_export_only_their_entry_point_of_the_projects_code():
    # Linked with --exclude-libs,ALL (python/CMakeLists.txt): the static libraries' symbols stay
    # inside each extension, so loading one binds them without a lookup through every library the
    # process has loaded (~0.4 ms of `import`), and the two extensions never bind each other's.
    import glob
    for package in ("hubfs", "h5chunk"):
        (so,) = glob.glob(os.path.join(BUILD_DIR, "python", package, "_core*.so"))
        r = subprocess.run(["nm", "-D", "--defined-only", "-C", so], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        names = [line.split(None, 2)[-1] for line in r.stdout.splitlines() if line.strip()]
        assert "PyInit__core" in names, names[:20]
        ours = [n for n in names if n.startswith(("hubfs::", "h5chunk::")) or "hubfs::" in n or "h5chunk::" in n]
        assert ours == [], f"{so} exports {len(ours)} of the project's symbols, e.g. {ours[:5]}"
