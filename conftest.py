"""Test-session setup shared by the tests and the doctests."""

import os

# scikit-learn's array-API estimator check runs only when scipy is imported
# with this set; set it before anything imports scipy so the check is not skipped.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import matplotlib

matplotlib.use("Agg")
