"""Make skts/data/digits_logits.npz: real network logits that skts may ship.

A small network (scikit-learn's MLPClassifier, one hidden layer of 32 ReLU
units, no weight decay, trained well past the point where its training loss
stops improving its test accuracy: the overconfidence that temperature
scaling corrects) trained on 600 of scikit-learn's 1,797 digit images. Its
logits, the output layer before the softmax, on the other images: 600 for
validation (to fit T) and 597 for test (to judge it).

The digits are scikit-learn's own (BSD-3-Clause), and so is this output.
Run it to rewrite the file (with the same bytes), or give another path::

    python scripts/make_digits_logits.py [OUT]
"""

import io
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import sklearn
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

OUT = Path(__file__).resolve().parents[1] / "skts" / "data" / "digits_logits.npz"


def output_logits(net: MLPClassifier, X) -> np.ndarray:
    """The output layer's activations before the softmax."""
    a = X
    for W, b in zip(net.coefs_[:-1], net.intercepts_[:-1], strict=True):
        a = np.maximum(a @ W + b, 0)
    return a @ net.coefs_[-1] + net.intercepts_[-1]


def main(out: Path = OUT) -> None:
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    X_train, X_rest, y_train, y_rest = train_test_split(
        X, y, train_size=600, stratify=y, random_state=0
    )
    X_val, X_test, y_val, y_test = train_test_split(
        X_rest, y_rest, train_size=600, stratify=y_rest, random_state=0
    )
    net = MLPClassifier(
        hidden_layer_sizes=(32,), alpha=0.0, max_iter=2000, tol=0, random_state=0
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        net.fit(X_train, y_train)
    arrays = {
        "val_logits": output_logits(net, X_val).astype(np.float32),
        "val_labels": y_val.astype(np.int64),
        "test_logits": output_logits(net, X_test).astype(np.float32),
        "test_labels": y_test.astype(np.int64),
        # (training is floating point: other versions give other last bits)
        "made_with": np.array(
            [f"numpy {np.__version__}", f"scikit-learn {sklearn.__version__}"]
        ),
    }
    assert np.array_equal(arrays["test_logits"].argmax(1), net.predict(X_test)), (
        "the logits are not the network's"
    )
    # np.savez_compressed stamps the zip entries with the time; write them
    # with a fixed date so that a rerun gives the same bytes.
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, array, allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, buffer.getvalue())
    accuracy = (arrays["test_logits"].argmax(1) == y_test).mean()
    print(
        f"{out.name}: test accuracy {accuracy:.4f}, {out.stat().st_size:,} bytes",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
