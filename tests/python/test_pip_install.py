"""`pip install .` from a clone, as a Python user installs things: into a virtual environment
(Debian 12 refuses pip installs into its own Python), offline, with Debian's setuptools, wheel
and CMake. The packages import from the environment, and the programs are on its bin/.

The copy of the clone builds in the test run's own CMake build directory (HUBFS_BUILD_DIR, which
setup.py honours): already built, so the install takes seconds rather than a full build."""

import os
import shutil
import subprocess
import time

from conftest import BUILD_DIR, REPO_ROOT


def _clone_like_copy(dest):
    """The files a clone holds: tracked and untracked-but-not-ignored (no build directories)."""
    files = subprocess.run(["git", "-C", REPO_ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.split(b"\0")
    for f in filter(None, files):
        src = os.path.join(REPO_ROOT, f.decode())
        if not os.path.isfile(src):
            continue  # deleted in the work tree
        target = os.path.join(dest, f.decode())
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(src, target)


def test_pip_install_into_a_venv_offline(tmp_path):
    started = time.monotonic()
    src, venv = tmp_path / "hubfs", tmp_path / "venv"
    _clone_like_copy(src)
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HUBFS_BIN", "PIP_INDEX_URL")}
    env.update(HUBFS_BUILD_DIR=BUILD_DIR, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1", HOME=str(tmp_path))
    # --no-index: nothing may come from the network; every dependency is Debian's.
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "--no-index", "--no-cache-dir",
                        str(src)], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    probe = ("import h5chunk, hubfs, os, sys, numpy as np;"
             "assert h5chunk.__file__.startswith(sys.prefix), h5chunk.__file__;"
             "assert hubfs.__file__.startswith(sys.prefix), hubfs.__file__;"
             "assert hubfs.find_program().startswith(sys.prefix), hubfs.find_program();"
             "import h5chunk._core, hubfs._core;"
             "print('ok')")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, env=env,
                       cwd=str(tmp_path))
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    for program, words in (("hubfs", "mount"), ("h5chunk", "read")):
        path = venv / "bin" / program
        assert os.access(path, os.X_OK), path
        r = subprocess.run([str(path), "--help"], capture_output=True, text=True, env=env)
        assert r.returncode == 0 and words in r.stdout, r.stdout + r.stderr
    # Uninstalling takes it all away again.
    r = subprocess.run([str(venv / "bin" / "pip"), "uninstall", "-y", "hubfs"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert not (venv / "bin" / "h5chunk").exists()
    print(f"pip install test: {time.monotonic() - started:.1f} s")
