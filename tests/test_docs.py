"""The documentation site builds with warnings as errors.

Every code block of docs/*.md and README.md also runs as a doctest (see
``[tool.pytest.ini_options]`` in pyproject.toml).
"""

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from _data import DATA

ROOT = Path(__file__).resolve().parents[1]


def test_sphinx_build_has_no_warnings(tmp_path):
    # Built from a copy: the example gallery writes its pages beside the
    # sources, and nothing a test writes may land in the repository.
    before = _tree(ROOT / "docs")
    has_data = DATA.exists()
    home = DATA if has_data else tmp_path / "skts_data"
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
        # The CIFAR example reads the real logits when they are here (else
        # its fetch finds an empty data home of the test's and no network).
        env={**os.environ, "MPLBACKEND": "Agg", "SKTS_DATA": str(home)},
    )
    assert result.returncode == 0, result.stderr
    # The API reference is generated from the docstrings, with readable
    # signatures, and every public function and method shows an example.
    generated = tmp_path / "html" / "generated"
    html = (generated / "skts.TemperatureScaledClassifier.html").read_text()
    assert "smallest candidate" in html
    for page in generated.glob("*.html"):
        for raw in ("NDArray", "ArrayLike", "numpy.typing", "np.float64]"):
            assert raw not in page.read_text(), (page.name, raw)
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
            "CIFAR-10 DenseNet-40: T = 2.884" if has_data else "skipped"
        ),
    }
    for name, text in expected.items():
        page = (gallery / f"{name}.html").read_text()
        assert text in page, name
        figures = list(
            (tmp_path / "html" / "_images").glob(f"sphx_glr_{name}_[0-9]*.png")
        )
        assert bool(figures) == (name != "plot_cifar_logits" or has_data), name
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
    _check_reference_pages(tmp_path / "html")
    _check_mathjax_is_served_with_the_pages(tmp_path / "html")
    _check_home_page(tmp_path / "html")
    _check_in_a_browser(tmp_path / "html")


def _public_names():
    import skts
    import skts.datasets
    import skts.metrics

    names = [f"skts.{n}" for n in skts.__all__ if n not in ("__version__", "metrics")]
    names += [f"skts.metrics.{n}" for n in skts.metrics.__all__]
    names += [f"skts.datasets.{n}" for n in skts.datasets.__all__]
    names += ["skts.torch.calibrate", "skts.torch.TemperatureScaledModule"]
    return [*names, "skts.cli.main"]


def _check_reference_pages(html):
    """scikit-learn's shape: one page per public object, "Examples using X"
    (sphinx-gallery's backreferences), links into the ecosystem's docs."""
    generated = html / "generated"
    for name in _public_names():
        assert (generated / f"{name}.html").exists(), name
    page = (generated / "skts.TemperatureScaler.html").read_text()
    assert "Examples using" in page
    assert 'href="../auto_examples/plot_cifar_logits.html"' in page
    assert "Examples using" in (generated / "skts.ReliabilityDisplay.html").read_text()
    # The API index lists the objects, each linking to its page.
    api = (html / "api.html").read_text()
    assert 'href="generated/skts.TemperatureScaledClassifier.html' in api
    # intersphinx: links into scikit-learn, NumPy, SciPy, matplotlib, PyTorch
    # and Dask (from their inventories, or ours when offline).
    pages = "".join(p.read_text() for p in html.rglob("*.html"))
    for url in (
        "https://scikit-learn.org/stable/modules/generated/sklearn.utils.Bunch.html",
        "https://numpy.org/doc/stable/reference/generated/numpy.save.html",
        "https://docs.scipy.org/doc/scipy/reference/generated/scipy.special.",
        "https://matplotlib.org/stable/api/_as_gen/matplotlib.axes.Axes.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.nn.Module.html",
        "https://docs.dask.org/en/stable/generated/dask.array.Array.html",
    ):
        assert f'href="{url}' in pages, url


def _check_mathjax_is_served_with_the_pages(html):
    assert (html / "_static" / "mathjax" / "tex-svg.js").stat().st_size > 1e6
    import re

    for page in html.rglob("*.html"):
        for src in re.findall(r'src="([^"]*mathjax[^"]*)"', page.read_text(), re.I):
            assert not src.startswith(("http:", "https:", "//")), (page.name, src)
    assert 'src="_static/mathjax/tex-svg.js"' in (html / "user_guide.html").read_text()


def _check_home_page(html):
    import re

    index = (html / "index.html").read_text()
    assert "pip install skts" in re.sub(r"<[^>]+>", "", index)
    assert '<img alt="A DenseNet-40' in index
    for thing in ("Fits one temperature", "Measures calibration", "Scales",
                  "Goes beyond one temperature"):
        assert thing in index, thing


# Pages looked at in a real browser (headless Chromium), 1280 px wide.
_BROWSED = [
    "index.html",
    "quickstart.html",
    "user_guide.html",
    "metrics.html",
    "performance.html",
    "developers.html",
    "data.html",
    "api.html",
    "generated/skts.TemperatureScaledClassifier.html",
    "generated/skts.ReliabilityDisplay.html",
    "auto_examples/plot_groups.html",
]
# Text nodes outside code and rendered math that still read like $...$.
_RAW_MATH = r"""() => {
  const root = document.querySelector('article') || document.body;
  const walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const raw = []; let node;
  while ((node = walk.nextNode())) {
    if (node.parentElement.closest('pre, code, script, style, mjx-container'))
      continue;
    const text = node.textContent;
    if (/\$[^$\s][^$]*\$/.test(text) || /\\(frac|begin|mathrm)/.test(text))
      raw.push(text.slice(0, 80));
  }
  return raw;
}"""
# Elements of the page that reach past the window, unless inside a box that
# scrolls (wide tables do, by design).
_CLIPPED = """() => {
  const out = [];
  for (const el of document.querySelectorAll('article *')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.right <= window.innerWidth + 1) continue;
    let p = el.parentElement, scrolls = false;
    while (p) {
      const o = getComputedStyle(p).overflowX;
      if (o === 'auto' || o === 'scroll') { scrolls = true; break; }
      p = p.parentElement;
    }
    if (!scrolls) out.push(el.tagName + ' ' + (el.textContent || '').slice(0, 40));
  }
  return out;
}"""


def _browser():
    """Headless Chromium through Playwright (Debian's chromium, no download)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    missing = (
        "Playwright (pip install playwright)" if sync_playwright is None
        else None if chromium else "Chromium (apt install chromium)"
    )
    if missing:
        if os.environ.get("SKTS_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"{missing} is needed to look at the built pages")
        pytest.skip(f"{missing} is not installed: the pages are not looked at")
    return sync_playwright, chromium


def _check_in_a_browser(html):
    sync_playwright, chromium = _browser()
    handler = functools.partial(_QuietHandler, directory=str(html))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=chromium,
                args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                      "--disable-background-networking", "--disable-sync",
                      "--disable-component-update"],
            )
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            # CI machines are busy (the other jobs build and test beside
            # this one): generous timeouts. The page's load event (its
            # scripts, styles and images), then MathJax's own promise; not
            # "networkidle" (500 ms without a request), which a loaded
            # machine once kept from settling for 30 s.
            page.set_default_timeout(180_000)
            typeset = {}
            for name in _BROWSED:
                page.goto(f"{base}/{name}", wait_until="load")
                page.evaluate(
                    "() => window.MathJax && MathJax.startup ? "
                    "MathJax.startup.promise : null"
                )
                width = page.evaluate("() => document.documentElement.scrollWidth")
                assert width <= 1280, (name, width)
                assert page.evaluate(_CLIPPED) == [], name
                assert page.evaluate(_RAW_MATH) == [], name
                typeset[name] = page.evaluate(
                    "() => document.querySelectorAll('mjx-container').length"
                )
                broken = page.evaluate(
                    "() => [...document.images].filter(i => i.complete && "
                    "i.naturalWidth === 0).map(i => i.src)"
                )
                assert broken == [], (name, broken)
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    # MathJax ran: the formulas are typeset, not left as text.
    assert typeset["user_guide.html"] >= 2 and typeset["metrics.html"] >= 1


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


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
