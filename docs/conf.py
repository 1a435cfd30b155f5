"""Sphinx configuration: Markdown pages (MyST) and numpydoc API reference."""

import skts

project = "skts"
author = "skts developers"
copyright = "2026, skts developers (BSD-3-Clause)"
release = version = skts.__version__
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
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
}
exclude_patterns = ["_build", "images/*.md"]
numpydoc_show_class_members = False
# Types are in the numpydoc "Parameters" sections, in words; the signatures
# stay readable (no NDArray[np.float64] or ArrayLike).
autodoc_typehints = "none"
numpydoc_xref_param_type = False
autosummary_generate = False
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
