"""The store's compiled kernel (store/_kernel.c), built when a C compiler is there: `optional`
lets the install go on without it, and store/kernel.py falls back to the pure-Python paths."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("mqtool_store._kernel", ["store/_kernel.c"], optional=True,
                             extra_compile_args=["-O2", "-Wall", "-Wno-unused-parameter"])])
