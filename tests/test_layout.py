"""The architecture (DESIGN.md, docs/developers.md) as checks on the source:
who may import what."""

import ast
from pathlib import Path

import pytest

import skts

# (the package's own folder: the source tree, or an installed wheel)
PACKAGE = Path(skts.__file__).resolve().parent

# Imports point down this list (a module may import only those below it).
LAYERS = [
    "skts.cli",
    "skts._display",
    "skts._ladder",
    "skts.metrics",
    "skts.torch",
    "skts.datasets",
    "skts._classifier",
    "skts._responses",
    "skts._linear",
    "skts._scaler",
    "skts._grouped",
    "skts._torch",
    "skts._fit",
    "skts._dask",
    "skts._validation",
    "skts._array_api",
    "skts._sklearn_compat",
    "skts._numerics",
    "skts._kernel",
]


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(p for p in parts if p != "__init__")
        yield name, ast.parse(path.read_text(encoding="utf-8"))


def _imports(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []


def _layer(module: str) -> int | None:
    for i, top in enumerate(LAYERS):
        if module == top or module.startswith(top + "."):
            return i
    return None


MODULES = dict(_modules())


def test_the_package_is_what_the_layers_name():
    assert len(MODULES) > 30
    unplaced = [m for m in MODULES if m not in ("skts", "skts.__main__")]
    assert [m for m in unplaced if _layer(m) is None] == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_layers(module):
    here = _layer(module)
    for target, names in _imports(MODULES[module]):
        if target == "skts" and names:  # from skts import X
            target = f"skts.{names[0]}" if names[0] != "__version__" else "skts"
        there = _layer(target)
        if here is None or there is None:
            continue
        assert there >= here, f"{module} imports {target}, which sits above it"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_private_names_stay_where_they_belong(module):
    for target, names in _imports(MODULES[module]):
        if target.startswith("sklearn"):
            private = [n for n in names if n.startswith("_")] or (
                ["(module)"] if "._" in target else []
            )
            if module != "skts._sklearn_compat":
                assert not private, f"{module}: private scikit-learn {target} {private}"
        if target.startswith("skts.") and module != target:
            same_package = target.split(".")[1] == module.split(".")[1]
            crossing = [n for n in names if n.startswith("_") and n != "_kernel"]
            if module.startswith("skts.cli"):
                assert not crossing or same_package, f"{module}: {target} {crossing}"
            elif not same_package:
                assert not crossing, f"{module} takes {crossing} from {target}"


def test_the_numerics_import_numpy_decimal_and_the_kernel_only():
    for module, tree in MODULES.items():
        if not module.startswith("skts._numerics"):
            continue
        for target, _ in _imports(tree):
            if target.startswith("skts"):
                assert target.startswith(("skts._numerics", "skts._kernel")) or (
                    target == "skts"
                ), f"{module} imports {target}"
            assert not target.startswith(("sklearn", "scipy", "dask", "torch")), (
                f"{module} imports {target}"
            )
