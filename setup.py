"""`pip install .` and `python3 -m build --wheel`: setuptools drives CMake.

The build backend is setuptools (Debian's python3-setuptools), so that
`pip install --no-build-isolation .` works with no package index; scikit-build-core,
which would do the same, is not packaged in Debian 12. Everything that is not
packaging (the metadata) is in pyproject.toml; the version is CMakeLists.txt's.

build_ext configures the project in build-pip/cmake (CMake's own, so that a second
`pip install` or a wheel after it rebuilds only what changed) and builds the two
targets the package ships: the extension module dtrain._dtrain and the `dtrain`
program, which goes to the environment's bin/ (on PATH once a venv is active).
The environment passes through: CMAKE_CXX_COMPILER_LAUNCHER=ccache,
CMAKE_BUILD_PARALLEL_LEVEL=2 and the like, and DTRAIN_CMAKE_ARGS adds CMake
options (e.g. "-DDTRAIN_NATIVE=OFF" for a wheel that runs on other x86-64 CPUs).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
BUILD_BASE = "build-pip"  # not build/: that is scripts/setup.sh's CMake tree
CMAKE_DIR = ROOT / BUILD_BASE / "cmake"


def projectVersion():
    text = (ROOT / "CMakeLists.txt").read_text()
    found = re.search(r"project\(dtrain\b[^)]*\bVERSION\s+([0-9][0-9.]*)", text)
    if not found:
        sys.exit("setup.py: no VERSION in CMakeLists.txt's project(dtrain ...)")
    return found.group(1)


def run(command):
    print("setup.py:", " ".join(shlex.quote(str(c)) for c in command), flush=True)
    subprocess.run(command, check=True)


class CMakeBuild(build_ext):
    """Builds the extension (and the program beside it) with CMake instead of the compiler calls of setuptools."""

    def build_extension(self, ext):
        if shutil.which("cmake") is None:
            sys.exit("setup.py: cmake not found (Debian: apt-get install cmake ninja-build; see scripts/setup.sh)")
        configure = ["cmake", "-S", ROOT, "-B", CMAKE_DIR, "-DCMAKE_BUILD_TYPE=Release",
                     "-DDTRAIN_BUILD_TESTS=OFF", f"-DPython3_EXECUTABLE={sys.executable}"]
        if shutil.which("ninja") and not (CMAKE_DIR / "CMakeCache.txt").exists():
            configure += ["-G", "Ninja"]
        configure += shlex.split(os.environ.get("DTRAIN_CMAKE_ARGS", ""))
        run(configure)
        run(["cmake", "--build", CMAKE_DIR, "--target", "dtrain", "dtrain_python"])
        built = next((CMAKE_DIR / "python" / "dtrain").glob("_dtrain*.so"), None)
        if built is None:
            sys.exit("setup.py: CMake built no Python module (it needs python3-dev and python3-pybind11)")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target)


setup(
    version=projectVersion(),
    packages=["dtrain"],
    package_dir={"dtrain": "src/python/dtrain"},
    ext_modules=[Extension("dtrain._dtrain", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # The program itself (not a Python wrapper that starts it): mpirun starts it once per rank.
    data_files=[("bin", [f"{BUILD_BASE}/cmake/dtrain"])],
    options={"build": {"build_base": BUILD_BASE}},
    zip_safe=False,
)
