"""The documentation site builds with warnings as errors.

Every code block of docs/*.md and README.md also runs as a doctest (see
``[tool.pytest.ini_options]`` in pyproject.toml).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from _data import DATA

ROOT = Path(__file__).resolve().parents[1]


def test_sphinx_build_has_no_warnings(tmp_path):
    # Built from a copy: the example gallery writes its pages beside the
    # sources, and nothing a test writes may land in the repository.
    before = _tree(ROOT / "docs")
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=_BUILT)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-b",
            "html",
            "-q",
            str(tmp_path / "docs"),
            str(tmp_path / "html"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        # The CIFAR example reads the real logits when they are here.
        env={**os.environ, "MPLBACKEND": "Agg", "SKTS_DATA": str(DATA)},
    )
    assert result.returncode == 0, result.stderr
    html = (tmp_path / "html" / "api.html").read_text()
    # The API reference is generated from the docstrings, with readable
    # signatures, and every public function and method shows an example.
    assert "TemperatureScaledClassifier" in html and "smallest candidate" in html
    for raw in ("NDArray", "ArrayLike", "numpy.typing", "np.float64]"):
        assert raw not in html, raw
    assert (tmp_path / "html" / "user_guide.html").exists()
    # The gallery ran its examples: their output and figures are in the pages.
    example = (tmp_path / "html" / "auto_examples" / "plot_groups.html").read_text()
    assert "bold (n=" in example and "95% interval" in example
    assert list((tmp_path / "html" / "_images").glob("sphx_glr_plot_groups_*.png"))
    assert _tree(ROOT / "docs") == before  # (a build of its own may be there)
    gallery = tmp_path / "html" / "auto_examples"
    expected = {
        "plot_cost_sensitive": "calibrated, 0.091",
        "plot_naive_bayes": "group B: its own T",
        "plot_model_selection": "best C with temperature scaling",
        "plot_many_classes": "(the truth is 1.7)",
        "plot_cifar_logits": (
            "CIFAR-10 DenseNet-40: T = 2.884" if DATA.exists() else "skipped"
        ),
    }
    for name, text in expected.items():
        page = (gallery / f"{name}.html").read_text()
        assert text in page, name
        figures = list(
            (tmp_path / "html" / "_images").glob(f"sphx_glr_{name}_[0-9]*.png")
        )
        assert bool(figures) == (name != "plot_cifar_logits" or DATA.exists()), name
    # The ecosystem's theme, with the copyright in the footer.
    index = (tmp_path / "html" / "index.html").read_text()
    assert "pydata-sphinx-theme" in index
    assert "Copyright 2026, skts developers" in index and "©. |" not in index
    # Formulas are math (MathJax), not code blocks.
    guide = (tmp_path / "html" / "user_guide.html").read_text()
    assert "mathjax" in guide.lower() and "\\begin{align*}" in guide
    assert "Σ_l exp(z_l(x)/T)" not in guide  # the old formula in a code block
    assert "\\mathrm{ECE}" in (tmp_path / "html" / "metrics.html").read_text()
    # Code blocks wrap their long lines instead of scrolling sideways.
    assert "_static/skts.css" in guide
    css = (tmp_path / "html" / "_static" / "skts.css").read_text()
    assert "white-space: pre-wrap" in css


_BUILT = shutil.ignore_patterns("_build", "auto_examples", "sg_execution_times.rst")


def _tree(folder):
    return {
        (str(p.relative_to(folder)), p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
    }


def test_a_built_docs_tree_is_not_collected(tmp_path):
    """The README's docs build leaves docs/_build and docs/auto_examples in
    the tree (issue 28: the suite then failed); their files are outputs, not
    tests, so a test run beside a built site collects the same tests."""
    for name in ("pyproject.toml", "conftest.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("```python\n>>> 1 + 1\n2\n```\n")
    for built in ("docs/auto_examples", "docs/_build/html/_sources"):
        (tmp_path / built).mkdir(parents=True)
        (tmp_path / built / "plot_x.py").write_text("raise SystemExit('ran')\n")
        (tmp_path / built / "page.md").write_text("```python\n>>> 1\n2\n```\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "docs"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    collected = [line for line in result.stdout.splitlines() if "::" in line]
    assert collected == ["docs/page.md::page.md"], result.stdout


def test_every_public_function_and_method_has_an_example():
    import inspect

    import skts
    import skts.cli
    import skts.metrics

    objects = [
        getattr(skts, n) for n in skts.__all__ if n not in ("__version__", "metrics")
    ]
    objects += [getattr(skts.metrics, n) for n in skts.metrics.__all__]
    objects.append(skts.cli.main)
    missing = []
    for obj in list(objects):
        if inspect.isclass(obj):
            for name, member in vars(obj).items():
                if name.startswith("_"):
                    continue
                if isinstance(member, (classmethod, staticmethod)):
                    member = member.__func__
                if isinstance(member, property):
                    member = member.fget
                if inspect.isfunction(member):
                    objects.append(member)
    for obj in objects:
        doc = inspect.getdoc(obj) or ""
        if "Examples\n--------" not in doc:
            missing.append(getattr(obj, "__qualname__", repr(obj)))
    assert missing == []


def test_the_pages_use_public_names_only():
    # What a user copies from the docs must work with the public API (the
    # persistence page names the trusted classes by their module, as skops
    # requires, but imports nothing private).
    # (The developer page, "How skts works", shows the internals on purpose.)
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    pages = [p for p in pages if p.name != "developers.md"]
    assert len(pages) >= 10
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "from skts._" not in text and "import skts._" not in text, page.name


def test_the_slow_tests_are_left_out_and_ci_runs_them():
    tomllib = pytest.importorskip("tomllib")

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert "-m 'not slow'" in config["ini_options"]["addopts"]
    assert any(m.startswith("slow:") for m in config["ini_options"]["markers"])
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "`python -m pytest -m slow` runs them" in readme
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "python -m pytest -m slow" in ci
    # (the README's command, then the slow ones)
    command = next(line for line in readme.splitlines() if "[test]" in line)
    assert ci.index(command) < ci.index("python -m pytest -m slow")
