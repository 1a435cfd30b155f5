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
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "images/*.md"]
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
autosummary_generate = False
myst_heading_anchors = 3
html_theme = "alabaster"
html_static_path = []
suppress_warnings = ["myst.xref_missing"]
