"""The store's compiled kernel (store/csrc/*.c, one module: mqtool_store._kernel) and the send hot
path's header reader and answer filler (remoting/csrc/*.c: mqtool_remoting._header) and its loop
over a read's sends (mqtool/broker/csrc/sendrun.c: mqtool.broker._sendrun), built when a C compiler is
there: `optional` lets the install go on without them, and the pure-Python paths do the same work
(store/kernel.py, mqtool/broker/fastsend.py).""" 
from glob import glob

from setuptools import Extension, setup

FLAGS = ["-O2", "-Wall", "-Wno-unused-parameter"]
setup(ext_modules=[Extension("mqtool_store._kernel", sorted(glob("store/csrc/*.c")), depends=["store/csrc/kernel.h"],
                             optional=True, extra_compile_args=FLAGS),
                   Extension("mqtool_remoting._header", sorted(glob("remoting/csrc/*.c")), optional=True,
                             extra_compile_args=FLAGS),
                   Extension("mqtool.broker._sendrun", ["mqtool/broker/csrc/sendrun.c"], optional=True,
                             extra_compile_args=FLAGS)])
