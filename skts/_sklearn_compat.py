"""Every private scikit-learn name skts uses, behind one file.

scikit-learn's underscore names may move between releases; when one does,
this file is the only place to change (imbalanced-learn keeps its
``utils/_sklearn_compat.py`` for the same reason). Public scikit-learn names
are imported where they are used.
"""

from sklearn.base import _fit_context
from sklearn.model_selection._validation import _enforce_prediction_order
from sklearn.utils import _safe_indexing
from sklearn.utils._array_api import (
    _convert_to_numpy,
    _max_precision_float_dtype,
    get_namespace,
)
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    Options,
    StrOptions,
    validate_params,
)
from sklearn.utils.metadata_routing import _routing_enabled
from sklearn.utils.validation import (
    _assert_all_finite,
    _check_method_params,
    _num_samples,
)

__all__ = [
    "HasMethods",
    "Interval",
    "Options",
    "StrOptions",
    "assert_all_finite",
    "check_method_params",
    "convert_to_numpy",
    "enforce_prediction_order",
    "fit_context",
    "get_namespace",
    "max_precision_float_dtype",
    "num_samples",
    "routing_enabled",
    "safe_indexing",
    "validate_params",
]

fit_context = _fit_context
enforce_prediction_order = _enforce_prediction_order
safe_indexing = _safe_indexing
convert_to_numpy = _convert_to_numpy
max_precision_float_dtype = _max_precision_float_dtype
assert_all_finite = _assert_all_finite
check_method_params = _check_method_params
num_samples = _num_samples
routing_enabled = _routing_enabled
