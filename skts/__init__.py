"""skts: temperature-scaling calibration for scikit-learn."""

__version__ = "0.1.0"

__all__ = [
    "BoundaryTemperatureWarning",
    "MatrixScaler",
    "ReliabilityDisplay",
    "TemperatureCurveDisplay",
    "TemperatureScaledClassifier",
    "TemperatureScaler",
    "VectorScaler",
    "__version__",
    "calibration_ladder",
    "metrics",
]

# The public names are imported on first use (PEP 562): ``import skts`` and
# the command line's ``--help``/``--version`` do not pay for scikit-learn.
_WHERE = {
    "BoundaryTemperatureWarning": "skts._numerics",
    "ReliabilityDisplay": "skts._display",
    "TemperatureCurveDisplay": "skts._display",
    "TemperatureScaledClassifier": "skts._classifier",
    "TemperatureScaler": "skts._scaler",
    "VectorScaler": "skts._linear",
    "MatrixScaler": "skts._linear",
    "calibration_ladder": "skts._ladder",
}


def __getattr__(name: str):
    import importlib

    if name == "metrics":
        return importlib.import_module("skts.metrics")
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value  # once
        return value
    raise AttributeError(f"module 'skts' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
