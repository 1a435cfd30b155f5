"""Sphinx configuration: Markdown pages (MyST), an API reference in
scikit-learn's shape (one page per object, autosummary, "Examples using X"
from sphinx-gallery, intersphinx), MathJax served with the pages."""

import shutil
from pathlib import Path

import mathjax  # (django-static-mathjax: MathJax 3's files, no Django)

import skts

project = "skts"
author = "skts developers"
copyright = "2026, skts developers (BSD-3-Clause)"
release = version = skts.__version__
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
# Worked examples, executed at every build (so in the test suite, which
# builds the site in a temporary copy: nothing is written into docs/).
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "show_memory": False,
    # "Examples using X" on each API page (the templates' minigallery).
    "backreferences_dir": "generated/backreferences",
    "doc_module": ("skts",),
    "reference_url": {"skts": None},
}
# Without PyTorch (an optional extra), skts.torch's pages are built from its
# docstrings with torch mocked, and the PyTorch example is left out.
try:
    import torch  # noqa: F401
except ImportError:
    autodoc_mock_imports = ["torch"]
    sphinx_gallery_conf["ignore_pattern"] = r"plot_torch\.py"
exclude_patterns = ["_build", "images/*.md"]
numpydoc_show_class_members = False
# Types are in the numpydoc "Parameters" sections, in words; the signatures
# stay readable (no NDArray[np.float64] or ArrayLike).
autodoc_typehints = "none"
numpydoc_xref_param_type = False
# One page per public object (docs/_templates/autosummary), as scikit-learn.
autosummary_generate = True
templates_path = ["_templates"]
myst_heading_anchors = 3
# Real math: $...$ and $$...$$ (and LaTeX environments) rendered by MathJax.
myst_enable_extensions = ["dollarmath", "amsmath"]
# The theme of scikit-learn, imbalanced-learn and skops.
html_theme = "pydata_sphinx_theme"
html_title = f"skts {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}
# A flat site: no left sidebar, the page gets the width.
html_sidebars = {"**": []}
html_static_path = ["_static"]
# Code blocks wrap instead of scrolling sideways.
html_css_files = ["skts.css"]
suppress_warnings = ["myst.xref_missing"]

# Links into the docs of the libraries skts works with. Each falls back on a
# small inventory of ours (docs/_inventories: the objects these pages name),
# so that a build without the network links them too, with no warning.
_INVENTORIES = Path(__file__).parent / "_inventories"
intersphinx_mapping = {
    name: (url, (None, str(_INVENTORIES / f"{name}.txt")))
    for name, url in {
        "sklearn": "https://scikit-learn.org/stable/",
        "numpy": "https://numpy.org/doc/stable/",
        "scipy": "https://docs.scipy.org/doc/scipy/",
        "matplotlib": "https://matplotlib.org/stable/",
        "torch": "https://docs.pytorch.org/docs/stable/",
        "dask": "https://docs.dask.org/en/stable/",
    }.items()
}
intersphinx_timeout = 5

# MathJax from the package, copied beside the pages: math renders offline,
# with no CDN (tex-svg.js is one self-contained file, fonts included).
mathjax_path = "mathjax/tex-svg.js"
_MATHJAX = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5" / "tex-svg.js"


def _copy_mathjax(app, exception):
    if exception is None and app.builder.format == "html":
        target = Path(app.outdir) / "_static" / "mathjax"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(_MATHJAX, target / "tex-svg.js")


def _skip_request_methods(app, what, name, obj, skip, options):
    # scikit-learn's generated set_*_request methods: its metadata routing
    # guide documents them, not each estimator's page.
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    app.connect("build-finished", _copy_mathjax)
    app.connect("autodoc-skip-member", _skip_request_methods)
