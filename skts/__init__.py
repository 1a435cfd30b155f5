"""skts: temperature-scaling calibration for scikit-learn."""

from skts import metrics
from skts._classifier import TemperatureScaledClassifier
from skts._display import ReliabilityDisplay, TemperatureCurveDisplay
from skts._scaler import TemperatureScaler
from skts._temperature import BoundaryTemperatureWarning

__version__ = "0.1.0"

__all__ = [
    "BoundaryTemperatureWarning",
    "ReliabilityDisplay",
    "TemperatureCurveDisplay",
    "TemperatureScaledClassifier",
    "TemperatureScaler",
    "__version__",
    "metrics",
]
