"""Building skts: what a user sees when the build cannot work, and what the
build options do (the wheels themselves: .ci/wheel; the other compilers and
options: .ci/builds and tests/test_portable.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]


def _build_tools():
    try:
        import mesonpy  # noqa: F401
    except ImportError:
        pytest.skip("meson-python is not installed (the README's commands "
                    "install it before building)")
    if not (ROOT / "meson.build").exists():
        pytest.skip("no source tree beside the tests (an installed wheel)")


def _path_without_compilers(tmp_path):
    # Python and the build tools only: no cc, gcc, clang or any compiler
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    for tool in ("meson", "ninja"):
        path = Path(sys.executable).with_name(tool)
        if path.exists():
            (bin_dir / tool).symlink_to(path)
    return str(bin_dir)


@pytest.mark.parametrize("cc", [None, "/bin/false"])
def test_without_a_compiler_pip_says_so_in_one_line(tmp_path, cc):
    _build_tools()
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "CXX")}
    env["PATH"] = _path_without_compilers(tmp_path)
    if cc:
        env["CC"] = cc
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation",
         "--no-deps", "-w", str(tmp_path / "wheels"), str(ROOT)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode != 0
    lines = [line for line in out.splitlines() if "skts needs a C compiler" in line]
    assert len(lines) == 1, out[-3000:]
    (line,) = lines
    assert (f"CC={cc}" if cc else "no CC set") in line
    for hint in ("apt install gcc", "xcode-select --install",
                 "Build Tools for Visual Studio"):
        assert hint in line
    # and not meson's own paragraph about the detection
    assert "Unknown compiler" not in out
    assert "pre-processor defines" not in out
    assert not list(tmp_path.glob("wheels/*.whl"))
    assert not list(ROOT.glob(".mesonpy-*"))  # (nothing left in the tree)


def test_the_build_options_are_declared():
    # the names the README, .ci/builds and pyproject.toml pass to meson
    if not (ROOT / "meson.options").exists():
        pytest.skip("no source tree beside the tests (an installed wheel)")
    text = (ROOT / "meson.options").read_text()
    assert "option('openmp', type: 'feature'" in text
    assert "option('portable', type: 'boolean', value: false" in text
    build = (ROOT / "meson.build").read_text()
    assert "required: get_option('openmp')" in build
    assert "-DSKTS_PORTABLE" in build
    assert "/fp:precise" in build and "-ffp-contract=off" in build


def test_the_wheel_configuration_covers_every_platform():
    pyproject = ROOT / "pyproject.toml"
    config = tomllib.loads(pyproject.read_text())["tool"]["cibuildwheel"]
    assert set(config["linux"]["archs"]) == {"x86_64", "aarch64"}
    assert set(config["macos"]["archs"]) == {"x86_64", "arm64"}
    assert config["windows"]["archs"] == ["AMD64"]
    # every platform's identifier is built, none skipped (cibuildwheel's
    # fnmatch patterns)
    from fnmatch import fnmatch

    for platform in ("manylinux_x86_64", "manylinux_aarch64", "musllinux_x86_64",
                     "musllinux_aarch64", "macosx_x86_64", "macosx_arm64",
                     "win_amd64"):
        for python in ("cp310", "cp314"):
            ident = f"{python}-{platform}"
            assert any(fnmatch(ident, p) for p in config["build"].split()), ident
            assert not any(fnmatch(ident, p) for p in config["skip"].split()), ident
    assert fnmatch("cp312-win32", "*-win32")
    assert "auditwheel repair" in config["linux"]["repair-wheel-command"]
    assert "delocate-wheel" in config["macos"]["repair-wheel-command"]
    assert ".ci/test_installed.py" in config["test-command"]
    assert (ROOT / ".ci" / "test_installed.py").exists()
    assert (ROOT / config["macos"]["before-all"].split("{project}/")[1]).exists()
