"""Builds tierfs._tierfs with the project's CMake build (python/CMakeLists.txt) and puts it
in the package. The build tree is TIERFS_BUILD_DIR, or the repository's build/ (the one
scripts/build.sh makes), configured first when it does not exist yet; only the module's
target and what it needs are built there."""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
# The repository (its CMake project): this folder's parent, or TIERFS_SOURCE_DIR when pip
# is given a copy of this folder.
ROOT = os.environ.get("TIERFS_SOURCE_DIR") or os.path.dirname(HERE)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.path.abspath(os.environ.get("TIERFS_BUILD_DIR") or os.path.join(ROOT, "build"))
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                                   "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
        # The module is built for the Python that runs pip.
        subprocess.check_call(["cmake", "-DTIERFS_SDK_PYTHON=" + sys.executable, build_dir],
                              stdout=subprocess.DEVNULL)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "tierfs_python",
                               "-j", os.environ.get("JOBS", "2")])
        built = glob.glob(os.path.join(build_dir, "python", "tierfs", "_tierfs*.so"))
        if not built:
            raise RuntimeError("the build made no tierfs/_tierfs*.so in %s (are pybind11-dev and python3-dev "
                               "installed? scripts/install-deps.sh installs them)" % build_dir)
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(max(built, key=os.path.getmtime), dest)


setup(ext_modules=[Extension("tierfs._tierfs", sources=[])], cmdclass={"build_ext": CMakeBuild})
