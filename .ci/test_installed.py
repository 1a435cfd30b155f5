"""Run the whole test suite against the installed skts (a wheel), not the
source tree: the tests, docs and README are copied from SOURCE into a
scratch folder without the package itself, and pytest runs there, with the
installed package's own modules for their doctests.

Usage: python .ci/test_installed.py SOURCE [pytest arguments]
(cibuildwheel's test-command, and .ci/wheel; any platform.)
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def main(argv):
    source = Path(argv[1]).resolve()
    # Where the installed package is: asked from outside the source tree, so
    # that the source folder cannot shadow it.
    with tempfile.TemporaryDirectory(prefix="skts-installed-") as scratch:
        where = subprocess.run(
            [sys.executable, "-c",
             "import skts, os; print(os.path.dirname(skts.__file__))"],
            cwd=scratch, capture_output=True, text=True, check=True,
        ).stdout.strip()
        package = Path(where).resolve()
        if source in package.parents:
            sys.exit(f"test_installed: skts comes from the source tree ({package})")
        print(f"test_installed: skts from {package}", flush=True)
        tree = Path(scratch) / "tree"
        ignore = shutil.ignore_patterns(
            "_build", "auto_examples", "__pycache__", ".mesonpy-*"
        )
        tree.mkdir()
        for name in ("tests", "docs", "examples", "benchmarks", "scripts", ".ci"):
            if (source / name).is_dir():
                shutil.copytree(source / name, tree / name, ignore=ignore)
        for name in ("README.md", "conftest.py", "pyproject.toml"):
            shutil.copy2(source / name, tree / name)
        env = dict(os.environ)
        data = source.parent / "shared" / "data"
        if "SKTS_DATA" not in env and data.is_dir():
            env["SKTS_DATA"] = str(data)
        command = [
            sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
            "tests", "docs", "README.md", str(package), *argv[2:],
        ]
        print("test_installed:", " ".join(command), flush=True)
        return subprocess.run(command, cwd=tree, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
