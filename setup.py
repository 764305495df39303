"""Build the optional C kernels (openacl._native); everything else is in pyproject.toml.

The extension is optional: where no C compiler is available the install still succeeds and
openacl runs its numpy kernels (``openacl info`` says which). gnu11 lets the compiler fuse
multiply-adds; -fno-trapping-math lets it vectorise the branch-free selects (NaN and inf
results are unchanged: only floating-point exception flags are not preserved).
"""

import platform

from setuptools import Extension, setup

FLAGS = ["-O3", "-std=gnu11", "-fno-trapping-math", "-Wno-psabi"]
if platform.machine().lower() in ("x86_64", "amd64"):
    FLAGS.append("-mprefer-vector-width=512")  # the AVX-512 clone uses whole zmm registers

NATIVE = Extension("openacl._native",
                   ["src/openacl/_native.c", "src/openacl/_native_gemm.c",
                    "src/openacl/_native_pool.c"],
                   depends=["src/openacl/_native_gemm.h", "src/openacl/_native_pool.h"],
                   optional=True, extra_compile_args=FLAGS, extra_link_args=["-pthread"])

setup(ext_modules=[NATIVE])
