"""Test-session setup shared by the tests and the doctests."""

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# scikit-learn's array-API estimator check runs only when scipy is imported
# with this set; set it before anything imports scipy so the check is not skipped.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import matplotlib

matplotlib.use("Agg")


# The real CIFAR logits live beside our checkouts (../shared/data), or in the
# folder named by SKTS_DATA, not in a user's fresh clone: the pages that read
# them are skipped there, with a reason (docs/data.md says where to get them).
_DATA = Path(
    os.environ.get("SKTS_DATA")
    or Path(__file__).resolve().parent.parent / "shared" / "data"
)
# ... and skts.datasets' fetchers find that copy there (no download).
if _DATA.is_dir():
    os.environ.setdefault("SKTS_DATA", str(_DATA))


# skts.torch imports torch: its doctests need it.
try:
    import torch  # noqa: F401

    collect_ignore = []
except ImportError:
    collect_ignore = ["skts/torch.py", "skts/_torch.py"]
# What a docs build leaves in the tree (the README's sphinx command writes
# docs/_build and sphinx-gallery's docs/auto_examples) is output, not tests.
collect_ignore_glob = ["docs/_build/*", "docs/auto_examples/*", "build/*"]


def pytest_collection_modifyitems(config, items):
    """Skip, with a reason, what cannot run here: doctest pages that read the
    shared CIFAR logits when they are absent, pages that need Dask or
    PyTorch when they are not installed, and pages that need a newer
    scikit-learn than the oldest one supported (the oldest-versions job runs
    the suite on scikit-learn 1.7)."""
    import pytest
    import sklearn
    from sklearn.utils.fixes import parse_version

    old_sklearn = parse_version(sklearn.__version__) < parse_version("1.8")
    try:
        import dask.array  # noqa: F401
        import distributed  # noqa: F401

        has_dask = True
    except ImportError:
        has_dask = False
    try:
        import torch  # noqa: F401

        has_torch = True
    except ImportError:
        has_torch = False
    from skts.datasets import REMOTES

    # A copy here, or one the fetcher cached: no download in a test.
    home = Path(os.environ.get("SKTS_DATA") or "~/skts_data").expanduser()
    has_cifar10 = (home / "densenet40_cifar10.npz").exists() or (
        home / REMOTES["densenet40_cifar10"].filename
    ).exists()
    # (the CIFAR-100 page's numbers are those of our checkouts' network)
    has_cifar100 = (home / "playground_cifar100.npz").exists()
    for item in items:
        path = Path(str(item.fspath))
        if path.suffix != ".md":
            continue
        text = path.read_text(encoding="utf-8")
        code = "\n".join(  # (the page's doctest lines, not its prose)
            line for line in text.splitlines() if line.startswith((">>>", "..."))
        )
        if (
            (not _DATA.is_dir() and 'os.environ.get("SKTS_DATA"' in text)
            or (not has_cifar10 and "fetch_densenet40_cifar10" in code)
            or (not has_cifar100 and "playground_cifar100.npz" in code)
        ):
            item.add_marker(
                pytest.mark.skip(
                    reason=f"{path.name} reads the CIFAR logits, which are "
                    "neither in ../shared/data nor in $SKTS_DATA (docs/data.md "
                    "says where they come from)"
                )
            )
        elif not has_dask and "import dask" in path.read_text(encoding="utf-8"):
            item.add_marker(
                pytest.mark.skip(
                    reason=f"{path.name} runs on Dask, which is not installed "
                    "(pip install 'skts[dask]')"
                )
            )
        elif not has_torch and "import numpy as np, torch" in path.read_text(
            encoding="utf-8"
        ):
            item.add_marker(
                pytest.mark.skip(
                    reason=f"{path.name} trains a PyTorch network; PyTorch is "
                    "not installed (pip install torch)"
                )
            )
        elif old_sklearn and path.name == "reproduction.md":
            item.add_marker(
                pytest.mark.skip(
                    reason="compares with CalibratedClassifierCV(method="
                    "'temperature'), new in scikit-learn 1.8 (this is "
                    f"{sklearn.__version__})"
                )
            )


@pytest.fixture(autouse=True)
def _doctest_temporaries(request, tmp_path_factory, monkeypatch):
    """A doctest page's temporary folders (``tempfile.mkdtemp()``) are made in
    a folder of pytest's own, removed after the page, also when it fails (a
    page cannot clean up in a ``finally``)."""
    if type(request.node).__name__ != "DoctestItem":
        yield
        return
    folder = tmp_path_factory.mktemp("doctest")
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield
    shutil.rmtree(folder, ignore_errors=True)


# Nothing a test or doctest writes may land in the repository: every new
# file that git would show (untracked and not ignored) fails the session.
_ROOT = Path(__file__).resolve().parent


def _untracked() -> set[str] | None:
    import subprocess

    if not (_ROOT / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return {line[3:] for line in out.stdout.splitlines() if line.startswith("??")}


def pytest_sessionstart(session):
    session.config._skts_untracked = _untracked()


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, "_skts_untracked", None)
    after = _untracked()
    if before is None or after is None:
        return
    new = sorted(after - before)
    if new:
        print(f"\nThe tests wrote into the repository: {new}", file=sys.stderr)
        session.exitstatus = 1
