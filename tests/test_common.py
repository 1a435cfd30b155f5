"""scikit-learn's estimator checks, with no expected failures."""

from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.utils.estimator_checks import parametrize_with_checks

from skts import TemperatureScaledClassifier


@parametrize_with_checks(
    [
        TemperatureScaledClassifier(),  # ensemble="auto": averaged fold models
        TemperatureScaledClassifier(ensemble=False),
        TemperatureScaledClassifier(LogisticRegression(C=10.0)),
        TemperatureScaledClassifier(GaussianNB()),
        TemperatureScaledClassifier(GaussianNB(), solver="continuous"),
        # the next rungs, as a meta-estimator option (they may change labels)
        TemperatureScaledClassifier(method="vector"),
        TemperatureScaledClassifier(GaussianNB(), method="matrix", ensemble=False),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
