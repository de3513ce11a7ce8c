"""Build hook: compile the CPU simulator's shared libraries during install.

PEP 621 metadata lives in pyproject.toml.  This file adds a ``build_py`` step that
runs ``acl_bindings/sim/build.py``.  Without a C compiler the install still
succeeds: the build writes ``acl_bindings/sim/BUILD_ERROR.txt``, the install says so
in one line (a warning, which pip 26 shows and older pips keep to ``-v``), the first
import of the package warns the same where no CANN is found, and the simulator reports
itself unavailable with that reason.

A wheel that carries the simulator's ``.so`` files is tagged for this platform
(``py3-none-<platform>``: the libraries are loaded with ctypes, so any Python 3
will do, but only on this OS and CPU); one built without a compiler has no
binaries and stays ``py3-none-any``.
"""

from __future__ import annotations

import importlib.util
import os
import warnings

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
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
        if not _build_simulator():
            # one line, no source line to quote; pip 26 shows a build hook's warning, older pips (those that
            # `python3 -m venv` brings: 23.0.1 to 25.x) do not: the first import of the package says it too
            warnings.warn_explicit(_BUILT["message"], UserWarning, "upsample3d-grad install", 0)
        # The libraries are package data (acl_bindings/sim/lib64/*), copied by build_py itself.
        super().run()


_BUILT = {}


def _build_simulator():
    """Compile the simulator once per setup run; True when its libraries were built."""
    if "ok" not in _BUILT:
        source_root = os.path.join(HERE, "acl_bindings", "sim")
        result = _sim_build_module().build(source_root, check=False)
        _BUILT["ok"] = bool(result.get("ok"))
        if _BUILT["ok"]:
            print(f"built the CANN simulator in {source_root}/lib64")
        else:
            _BUILT["message"] = _sim_build_module().not_built_notice(str(result.get("error") or ""))
            print(f"WARNING: {_BUILT['message']}")
    return _BUILT["ok"]


class SimulatorDistribution(Distribution):
    """A distribution that counts the simulator's libraries as binary modules: a wheel carrying them is
    installed into platlib and not tagged pure."""

    def has_ext_modules(self):
        return _build_simulator()


class PlatformWheel(bdist_wheel):
    """bdist_wheel that tags a wheel with the simulator's libraries ``py3-none-<platform>``."""

    def get_tag(self):
        impl, abi, plat = super().get_tag()
        if self.root_is_pure:
            return impl, abi, plat
        return "py3", "none", plat


setup(cmdclass={"build_py": BuildPyWithSimulator, "bdist_wheel": PlatformWheel}, distclass=SimulatorDistribution)
