# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
"""Builds the stepwatch package for the interpreter that runs it (pyproject.toml holds the metadata).

`pip install <checkout>/python` compiles the C extension stepwatch._native from the client's C++
sources in the checkout (../src, ../include) for that interpreter. The extension is optional: with
no compiler, no Python headers or a failed build, the package installs without it and loads
libstepwatch.so through ctypes instead (`python -m stepwatch` says which). Outside a checkout (an
sdist) there are no sources to build: the package is the ctypes binding only.
"""

import concurrent.futures
import os
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# What src/client/CMakeLists.txt links into stepwatch_client: the C ABI (stepwatch.cpp) and the
# parts of stepwatch_contract and stepwatch_common it reaches (each of these is needed; the rest of
# those libraries is not). Keep it in step with them: tests/package/venv_test.sh imports the built
# extension and writes a beacon through it, so a source missing here fails there (an undefined
# symbol when the module loads, and the package falls back to ctypes).
CLIENT_SOURCES = [
    "src/client/stepwatch.cpp",
    "src/contract/beacon_writer.cpp",
    "src/contract/identity.cpp",
    "src/contract/names.cpp",
    "src/common/host.cpp",
    "src/common/proc_stat.cpp",
    "src/common/text_file.cpp",
]
# fmt header-only: the module needs no libfmt.so where it is installed.
CXX_FLAGS = ["-std=c++20", "-fvisibility-inlines-hidden", "-DFMT_HEADER_ONLY"]


def read_version():
    """The checkout's VERSION file; in an sdist, the version its PKG-INFO recorded."""
    path = os.path.join(ROOT, "VERSION")
    if os.path.isfile(path):
        with open(path) as f:
            return f.read().strip()
    with open(os.path.join(HERE, "PKG-INFO")) as f:
        for line in f:
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    raise SystemExit(f"stepwatch: no version: neither {path} nor PKG-INFO in {HERE}")


VERSION = read_version()


class BuildPy(build_py):
    """Writes stepwatch/_version.py into the build output (it is never in the source tree)."""

    def run(self):
        # pip 23 builds in this directory: whatever an earlier build left in build/lib (a module
        # built then, when this build cannot compile it) would go into the wheel. Start empty.
        shutil.rmtree(os.path.join(self.build_lib, "stepwatch"), ignore_errors=True)
        super().run()
        target = os.path.join(self.build_lib, "stepwatch", "_version.py")
        self.mkpath(os.path.dirname(target))
        with open(target, "w") as f:
            f.write(f'__version__ = "{VERSION}"  # written by setup.py from VERSION\n')

    def get_outputs(self, include_bytecode=True):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, "stepwatch", "_version.py")]


class BuildExt(build_ext):
    """Compiles the C++ sources with C++ flags and the C file without them, then links the module
    with g++, exporting PyInit__native only (the client's symbols stay local, as the CMake build's
    --exclude-libs does: a libstepwatch.so loaded in the same process cannot interpose).

    A failure anywhere here is caught by setuptools for an optional extension: a warning, and the
    package installs without stepwatch._native."""

    def build_extension(self, ext):
        os.makedirs(self.build_temp, exist_ok=True)
        version_script = os.path.join(self.build_temp, "stepwatch_native.map")
        with open(version_script, "w") as f:
            f.write("{ global: PyInit__native; local: *; };\n")

        def compile_one(source):
            return self.compiler.compile(
                [os.path.join(ROOT, source)],
                output_dir=self.build_temp,
                macros=ext.define_macros,
                include_dirs=ext.include_dirs,
                debug=self.debug,
                extra_postargs=ext.extra_compile_args + CXX_FLAGS,
            )

        # One compiler process per source, as many at once as there are CPUs (each takes seconds).
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            objects = [obj for objs in pool.map(compile_one, CLIENT_SOURCES) for obj in objs]
        saved = (ext.extra_objects, ext.extra_link_args)
        ext.extra_objects = objects + list(ext.extra_objects or [])
        ext.extra_link_args = list(ext.extra_link_args or []) + [f"-Wl,--version-script={version_script}"]
        try:
            super().build_extension(ext)
        finally:
            ext.extra_objects, ext.extra_link_args = saved


def native_extension():
    if not all(os.path.isfile(os.path.join(ROOT, s)) for s in CLIENT_SOURCES):
        print(
            f"stepwatch: the client's C++ sources are not under {ROOT}/src (not a checkout): building no C extension;"
            " the package will use libstepwatch.so through ctypes",
            file=sys.stderr,
        )
        return []
    return [
        Extension(
            "stepwatch._native",
            # Only the C file: BuildExt compiles CLIENT_SOURCES (outside this directory, which
            # setuptools refuses in sources) with the C++ flags.
            sources=["stepwatch/_native.c"],
            include_dirs=[ROOT, os.path.join(ROOT, "include")],
            extra_compile_args=["-fvisibility=hidden"],
            language="c++",
            optional=True,
        )
    ]


setup(
    version=VERSION,
    ext_modules=native_extension(),
    cmdclass={"build_py": BuildPy, "build_ext": BuildExt},
)
