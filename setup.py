"""Build hook: the top-level ``conf/`` and ``data/`` ship inside the wheel as package data.

They stay at the top of the repository (the layout the README shows); the build copies them to
``tabmem/conf`` (also Hydra's ``pkg://tabmem.conf``) and ``tabmem/datasets``, where
``tabmem.paths`` finds them once installed. An editable install reads the top-level folders
themselves. Everything else is in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SHIPPED = {"conf": "conf", "data": "datasets"}  # top-level folder -> folder in the package


class BuildPyWithShippedFiles(build_py):
    """``build_py`` that also copies the shipped configs and datasets into the package."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        package = Path(self.build_lib) / "tabmem"
        for source, target in SHIPPED.items():
            shutil.rmtree(package / target, ignore_errors=True)  # nothing left from a last build
            self.copy_tree(str(ROOT / source), str(package / target))
        # A regular package, so Hydra's search path takes it as pkg://tabmem.conf.
        (package / "conf" / "__init__.py").write_text('"""tabmem\'s shipped Hydra configs."""\n')


setup(cmdclass={"build_py": BuildPyWithShippedFiles})
