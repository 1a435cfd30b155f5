"""Calibration metrics, reliability curves and scorers.

Naming follows scikit-learn: ``*_error`` and ``*_loss`` are lower-is-better,
scorers are ``neg_*``. Every metric here is computed from
:func:`reliability_curve`, so plots and numbers always agree.
"""

from skts.metrics._binned import (
    ReliabilityCurve,
    classwise_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    reliability_curve,
)
from skts.metrics._groups import temperature_by_group
from skts.metrics._report import CalibrationReport, calibration_report
from skts.metrics._scorer import get_scorer, get_scorer_names

__all__ = [
    "CalibrationReport",
    "ReliabilityCurve",
    "calibration_report",
    "classwise_calibration_error",
    "expected_calibration_error",
    "get_scorer",
    "get_scorer_names",
    "maximum_calibration_error",
    "reliability_curve",
    "temperature_by_group",
]


def __dir__() -> list[str]:
    # Only the public names: what the package imports is not part of
    # skts.metrics.
    return sorted(__all__)
