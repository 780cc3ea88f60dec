"""Ships gpuacct_auto.pth next to the package (site-packages root) so auto-instrumentation can
start at interpreter start.  Everything else lives in pyproject.toml."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "gpuacct_auto.pth"


class BuildPyWithPth(build_py):
    def run(self) -> None:
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        self.copy_file(os.path.join(here, PTH), os.path.join(self.build_lib, PTH))

    def get_outputs(self, include_bytecode=True):  # type: ignore[override]
        return list(super().get_outputs(include_bytecode)) + [os.path.join(self.build_lib, PTH)]


setup(cmdclass={"build_py": BuildPyWithPth})
