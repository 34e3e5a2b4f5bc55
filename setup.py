"""`pip install --no-build-isolation .`: the reshard Python module.

No downloads: the C++ part is built by CMake from this checkout with the
compilers and libraries scripts/install-deps.sh installs (pybind11 is Debian's
pybind11-dev), and only the module's target (reshard_python_core) and what it
links are built, in build-python/. CMAKE_ARGS (e.g.
"-DCMAKE_CXX_COMPILER_LAUNCHER=ccache") is passed to CMake; RESHARD_BUILD_JOBS
sets the parallel jobs (default: every core).
"""
import glob
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def project_version():
    """The version of CMakeLists.txt's project(), which the CLI prints too."""
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(reshard VERSION ([0-9.]+)", text).group(1)


class CMakeBuild(build_ext):
    """Builds reshard._core with CMake instead of compiling sources itself."""

    def build_extension(self, ext):
        build_dir = ROOT / "build-python"
        args = [
            f"-DPython_EXECUTABLE={sys.executable}",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DRESHARD_BUILD_PYTHON=ON",
            "-DRESHARD_BUILD_TESTS=OFF",
            "-DRESHARD_BUILD_BENCH=OFF",
        ]
        if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").exists():
            args += ["-G", "Ninja"]
        args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build_dir)] + args)
        jobs = os.environ.get("RESHARD_BUILD_JOBS", str(os.cpu_count() or 1))
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "reshard_python_core", "-j", jobs])
        built = glob.glob(str(build_dir / "python" / "reshard" / "_core*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one reshard/_core*.so in {build_dir}/python, found {built}")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)


setup(
    name="reshard",
    version=project_version(),
    description="Plan, predict and run the weight refit of RL jobs",
    packages=["reshard"],
    package_dir={"": "python"},
    ext_modules=[Extension("reshard._core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    extras_require={"pandas": ["pandas"]},
    zip_safe=False,
)
