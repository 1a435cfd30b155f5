"""Reliability diagrams and validation-loss curves, in scikit-learn's
Display style (matplotlib imported lazily, when a display is drawn).

``_reliability``: :class:`ReliabilityDisplay`; ``_curve``:
:class:`TemperatureCurveDisplay`; ``_common``: what both use.
"""

from skts._display._curve import TemperatureCurveDisplay
from skts._display._reliability import ReliabilityDisplay

__all__ = ["ReliabilityDisplay", "TemperatureCurveDisplay"]
