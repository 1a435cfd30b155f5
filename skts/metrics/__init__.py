"""Calibration metrics, reliability curves and scorers.

Naming follows scikit-learn: ``*_error`` and ``*_loss`` are lower-is-better,
scorers are ``neg_*``. Every binned metric here is computed from
:func:`reliability_curve`, so plots and numbers always agree; the smooth ECE
and the smoothed reliability diagram share one smoother the same way.
"""

from skts.metrics._binned import (
    ReliabilityCurve,
    classwise_calibration_error,
    expected_calibration_error,
    maximum_calibration_error,
    reliability_curve,
)
from skts.metrics._compare import CalibrationComparison, compare_calibration
from skts.metrics._debiased import debiased_calibration_error
from skts.metrics._groups import temperature_by_group
from skts.metrics._report import CalibrationReport, calibration_report
from skts.metrics._scorer import get_scorer, get_scorer_names
from skts.metrics._smooth import (
    SmoothCurve,
    smooth_calibration_error,
    smooth_reliability_curve,
)

__all__ = [
    "CalibrationComparison",
    "CalibrationReport",
    "ReliabilityCurve",
    "SmoothCurve",
    "calibration_report",
    "classwise_calibration_error",
    "compare_calibration",
    "debiased_calibration_error",
    "expected_calibration_error",
    "get_scorer",
    "get_scorer_names",
    "maximum_calibration_error",
    "reliability_curve",
    "smooth_calibration_error",
    "smooth_reliability_curve",
    "temperature_by_group",
]


def __dir__() -> list[str]:
    # Only the public names: what the package imports is not part of
    # skts.metrics.
    return sorted(__all__)
