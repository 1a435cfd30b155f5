"""Test-session setup shared by the tests and the doctests."""

import os

# scikit-learn's array-API estimator check runs only when scipy is imported
# with this set; set it before anything imports scipy so the check is not skipped.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import matplotlib

matplotlib.use("Agg")


def pytest_collection_modifyitems(config, items):
    """Skip, with a reason, what needs a newer scikit-learn than the oldest one
    supported (the oldest-versions job runs the suite on scikit-learn 1.7)."""
    import pytest
    import sklearn
    from sklearn.utils.fixes import parse_version

    if parse_version(sklearn.__version__) >= parse_version("1.8"):
        return
    reason = (
        "compares with CalibratedClassifierCV(method='temperature'), new in "
        f"scikit-learn 1.8 (this is {sklearn.__version__})"
    )
    for item in items:
        if item.nodeid.endswith("reproduction.md::reproduction.md"):
            item.add_marker(pytest.mark.skip(reason=reason))
