"""Sphinx configuration: Markdown pages (MyST) and numpydoc API reference."""

import skts

project = "skts"
author = "skts developers"
release = version = skts.__version__
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
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
numpydoc_xref_param_type = False
autosummary_generate = False
myst_heading_anchors = 3
html_theme = "alabaster"
html_static_path = []
suppress_warnings = ["myst.xref_missing"]
