"""The documentation site builds with warnings as errors.

Every code block of docs/*.md and README.md also runs as a doctest (see
``[tool.pytest.ini_options]`` in pyproject.toml).
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_sphinx_build_has_no_warnings(tmp_path):
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
            str(ROOT / "docs"),
            str(tmp_path / "html"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    html = (tmp_path / "html" / "api.html").read_text()
    # The API reference is generated from the docstrings.
    assert "TemperatureScaledClassifier" in html and "smallest candidate" in html
    assert (tmp_path / "html" / "user_guide.html").exists()
