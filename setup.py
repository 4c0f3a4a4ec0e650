"""The store's compiled kernel (store/csrc/*.c, one module: mqtool_store._kernel), built when a C
compiler is there: `optional` lets the install go on without it, and store/kernel.py falls back to
the pure-Python paths."""
from glob import glob

from setuptools import Extension, setup

setup(ext_modules=[Extension("mqtool_store._kernel", sorted(glob("store/csrc/*.c")), depends=["store/csrc/kernel.h"],
                             optional=True, extra_compile_args=["-O2", "-Wall", "-Wno-unused-parameter"])])
