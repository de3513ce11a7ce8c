"""Build hook: compile the CPU simulator's shared libraries during install.

PEP 621 metadata lives in pyproject.toml.  This file only adds a ``build_py``
step that runs ``acl_bindings/sim/build.py``.  Without a C compiler the install
still succeeds: the build writes ``acl_bindings/sim/BUILD_ERROR.txt`` and the
simulator reports itself unavailable with that reason.
"""

from __future__ import annotations

import importlib.util
import os

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _sim_build_module():
    spec = importlib.util.spec_from_file_location("_sim_build", os.path.join(HERE, "acl_bindings", "sim", "build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithSimulator(build_py):
    """build_py that also compiles the simulator into the package tree."""

    def run(self):
        sim = _sim_build_module()
        source_root = os.path.join(HERE, "acl_bindings", "sim")
        result = sim.build(source_root, check=False)
        if result.get("ok"):
            print(f"built the CANN simulator in {source_root}/lib64")
        else:
            print(f"WARNING: the CANN simulator was not built: {result.get('error')}")
        # The libraries are package data (acl_bindings/sim/lib64/*), copied by build_py itself.
        super().run()


setup(cmdclass={"build_py": BuildPyWithSimulator})
