"""Builds the Python packages and the programs with CMake for `pip install .` (pyproject.toml).

    /usr/bin/python3 -m venv --system-site-packages ENV
    ENV/bin/pip install --no-build-isolation .

The packages h5chunk and hubfs come from the build's python/ directory (the pybind11 extensions
included), the programs hubfs and h5chunk go to ENV/bin (hubfs also next to the hubfs package,
where hubfs.find_program looks first).

HUBFS_BUILD_DIR: an existing CMake build directory to build in and take everything from (only
the targets the install needs are built, against the sources that directory was configured
for); default: build/ in the source tree, configured here (Ninja when installed) if it is new.
HUBFS_BUILD_JOBS: parallel build jobs (default: the machine's cores).
"""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from distutils.command.build_scripts import build_scripts  # setuptools 66 (Debian 12) has no own

HERE = os.path.dirname(os.path.abspath(__file__))
# What `import h5chunk, hubfs` and the two programs need; nothing else (no tests, no benches).
TARGETS = ["python", "h5chunk_cli", "hubfs"]
PACKAGES = ["h5chunk", "hubfs"]


def build_dir() -> str:
    return os.path.abspath(os.environ.get("HUBFS_BUILD_DIR") or os.path.join(HERE, "build"))


_built = False


def cmake_build() -> str:
    """Configures (if new) and builds the install's targets once; returns the build directory."""
    global _built
    out = build_dir()
    if _built:
        return out
    if not os.path.isfile(os.path.join(out, "CMakeCache.txt")):
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        subprocess.check_call(["cmake", "-S", HERE, "-B", out, *generator, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
    jobs = os.environ.get("HUBFS_BUILD_JOBS") or str(os.cpu_count() or 2)
    subprocess.check_call(["cmake", "--build", out, "-j", jobs, "--target", *TARGETS])
    _built = True
    return out


class BuildPy(build_py):
    """The packages as the CMake build lays them out in build/python (extensions included)."""

    def run(self):
        built = os.path.join(cmake_build(), "python")
        for package in PACKAGES:
            dest = os.path.join(self.build_lib, package)
            if os.path.exists(dest):
                shutil.rmtree(dest)
            # symlinks=False: hubfs/bin/hubfs is a link to the build's program; copy the program.
            shutil.copytree(os.path.join(built, package), dest, symlinks=False,
                            ignore=shutil.ignore_patterns("__pycache__"))


class BuildScripts(build_scripts):
    """The programs, copied as they are (binaries: no shebang to rewrite)."""

    def run(self):
        bin_dir = os.path.join(cmake_build(), "bin")
        os.makedirs(self.build_dir, exist_ok=True)
        for name in ("hubfs", "h5chunk"):
            dest = os.path.join(self.build_dir, name)
            shutil.copy2(os.path.join(bin_dir, name), dest)
            os.chmod(dest, 0o755)


setup(
    packages=PACKAGES,
    package_dir={"": "python"},  # the sources; BuildPy installs the built copies in build/python
    # Named so that setuptools installs a scripts directory; BuildScripts supplies the programs.
    scripts=["hubfs", "h5chunk"],
    cmdclass={"build_py": BuildPy, "build_scripts": BuildScripts},
    zip_safe=False,
    # setuptools' own scratch (build/lib..., build/bdist...) under the CMake build's directory
    # name, in a folder of its own.
    options={"build": {"build_base": os.path.join("build", "setuptools")}},
    # Compiled extensions inside: the wheel is for this platform and this Python only.
    has_ext_modules=lambda: True,
)
