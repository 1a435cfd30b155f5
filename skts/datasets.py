"""Real network logits: published sets fetched on first use, and one shipped.

Like :mod:`sklearn.datasets`: each ``fetch_*`` downloads a published file
from its public URL (a repository pinned at a commit) the first time, checks
its sha256 before anything reads it, and keeps it in the data home
(:func:`get_data_home`: ``$SKTS_DATA``, else ``~/skts_data``). Later calls
read the cached copy (checked again: the files are small). Offline, a fetch
with nothing cached fails with one line that says what to download, from
where, and where to put it.

Two of the sources are Python pickles. They are unpickled only after their
checksum matches, and then with an unpickler that admits numpy arrays and
tuples, nothing else.

Probabilities are returned as log-probabilities, which temperature scaling
treats exactly as logits (``log_softmax`` differs from the logits by a
constant per row).

:func:`load_digits_logits` needs no download: the logits of a small network
trained on scikit-learn's digits by ``scripts/make_digits_logits.py``, shipped
with skts.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import io
import os
import pickle
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
from numpy._core.multiarray import _reconstruct
from sklearn.utils import Bunch

__all__ = [
    "clear_data_home",
    "fetch_cleanlab_cifar10",
    "fetch_densenet40_cifar10",
    "fetch_densenet100_cifar100",
    "fetch_vgg16_cifar10",
    "fetch_wideresnet16_cifar10",
    "get_data_home",
    "load_digits_logits",
]

# Where the files come from: raw files of public repositories. A mirror that
# serves the same paths ("{mirror}/{repo}/{commit}/{path}") can stand in,
# for machines that reach the internet only through one.
_ORIGIN = "https://raw.githubusercontent.com"


@dataclass(frozen=True)
class _Remote:
    repo: str
    commit: str
    path: str
    sha256: str
    licence: str

    @property
    def filename(self) -> str:
        return f"{self.repo.replace('/', '_')}_{Path(self.path).name}"

    def url(self) -> str:
        origin = os.environ.get("SKTS_DATA_MIRROR", _ORIGIN).rstrip("/")
        return f"{origin}/{self.repo}/{self.commit}/{self.path}"


# The sources, their commits and checksums (shared/data/README.md's table).
_EFS = "EFS-OpenSource/calibration-framework"
_EFS_COMMIT = "d16fc717ad7611927547f6ad13ebc1331b7c877b"
REMOTES = {
    "densenet40_cifar10": _Remote(
        "zongyuange/Workshop-repository",
        "47d09b45944fed6d73e0f62c69589e595876cc25",
        "sample_logits.p",
        "4d23b6ba266f62fc3dddb702dc74b7d629f7a6615b9e304904cee93a6992c1d5",
        "MIT (markus93/NN_calibration)",
    ),
    "wideresnet16_cifar10": _Remote(
        _EFS,
        _EFS_COMMIT,
        "examples/classification/records/cifar10/wideresnet-16-4-cifar-10.npz",
        "ce2bafe1fa22e8da7b132cb45556b5d154bd50bbec5d91913bba2e04fbd76182",
        "Apache-2.0",
    ),
    "densenet100_cifar100": _Remote(
        _EFS,
        _EFS_COMMIT,
        "examples/classification/records/cifar100/densenet-bc-100-cifar-100.npz",
        "6b8c33de93bdf1ae7de335f485c73c9f7198b359f85de6b1f21066a7e7c6379e",
        "Apache-2.0",
    ),
    "vgg16_cifar10": _Remote(
        "p-lambda/verified_calibration",
        "eeeb835ce0f45ca9361dbfd0139253950594b8f6",
        "data/cifar_probs.dat",
        "fe3cdd9e8d77336aa60916949ec126ef0c17a828d95c1999a88a59bc56a550bf",
        "MIT",
    ),
    "cleanlab_cifar10_probs": _Remote(
        "cleanlab/label-errors",
        "3fa2673aef3413ee3e1ace0eda0b0bedd9acd25e",
        "cross_validated_predicted_probabilities/cifar10_test_set_pyx.npy",
        "c445b25cee680e3919b4bd81d230a5c7c2179ed556609d84e000ee046bb44b49",
        "Apache-2.0",
    ),
    "cleanlab_cifar10_labels": _Remote(
        "cleanlab/label-errors",
        "e3ea63914629b0481d0d58c301110cb6c043cc69",
        "original_test_labels/cifar10_test_set_original_labels.npy",
        "8fba587d5b11011df52b2a20eb4a272eeaf20c2d162554059f714d4b78d23aed",
        "Apache-2.0",
    ),
}


def get_data_home(data_home: str | os.PathLike | None = None) -> str:
    """The folder where fetched logits are kept, created if needed.

    Parameters
    ----------
    data_home : str or path-like, default=None
        The folder; default ``$SKTS_DATA`` if set, else ``~/skts_data``.

    Returns
    -------
    str
        The folder's path.

    Examples
    --------
    >>> import tempfile
    >>> from skts.datasets import get_data_home
    >>> folder = tempfile.mkdtemp()
    >>> get_data_home(folder) == folder
    True
    """
    if data_home is None:
        data_home = os.environ.get("SKTS_DATA") or Path("~", "skts_data")
    folder = Path(data_home).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder)


def clear_data_home(data_home: str | os.PathLike | None = None) -> None:
    """Delete the files the fetchers downloaded (only those).

    Parameters
    ----------
    data_home : str or path-like, default=None
        As in :func:`get_data_home`.

    Examples
    --------
    >>> import tempfile
    >>> from skts.datasets import clear_data_home
    >>> clear_data_home(tempfile.mkdtemp())
    """
    folder = Path(get_data_home(data_home))
    for remote in REMOTES.values():
        with contextlib.suppress(FileNotFoundError):
            (folder / remote.filename).unlink()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fetch(name: str, data_home, download_if_missing: bool) -> Path:
    """The verified local file of ``REMOTES[name]``, downloaded if needed."""
    remote = REMOTES[name]
    folder = Path(get_data_home(data_home))
    path = folder / remote.filename
    if path.exists():
        got = _sha256(path)
        if got != remote.sha256:
            raise OSError(
                f"{path} is not the published file (sha256 {got[:12]}..., "
                f"expected {remote.sha256[:12]}...); delete it to download again"
            )
        return path
    if not download_if_missing:
        raise OSError(f"{path} is not there and download_if_missing=False")
    url = remote.url()
    fd, tmp = tempfile.mkstemp(prefix=f".{remote.filename}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    shutil.copyfileobj(response, out, 1 << 20)
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", None) or exc
                raise OSError(
                    f"cannot download {name} from {url} ({reason}); offline, "
                    f"download it by hand and save it as {path}"
                ) from None
        got = _sha256(Path(tmp))
        if got != remote.sha256:
            raise OSError(
                f"the file downloaded from {url} has sha256 {got[:12]}..., not "
                f"the published {remote.sha256[:12]}...; nothing was kept"
            )
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return path


class _ArraysOnly(pickle.Unpickler):
    """Unpickles numpy arrays (and the tuples and lists around them) only.

    (``_codecs.encode`` makes the bytes of an array in a protocol-2 pickle.)"""

    _ALLOWED = {
        ("_codecs", "encode"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            if module == "_codecs":
                return codecs.encode
            return _reconstruct if name == "_reconstruct" else getattr(np, name)
        raise pickle.UnpicklingError(
            f"refusing to unpickle {module}.{name}: only numpy arrays are read"
        )


def _unpickle_arrays(path: Path):
    with open(path, "rb") as fh:
        return _ArraysOnly(io.BytesIO(fh.read()), encoding="latin1").load()


def _logits(probs) -> np.ndarray:
    """Log-probabilities as logits (float32; 0 gives the float32 minimum's
    log rather than -inf, which the exact rule would reject)."""
    probs = np.asarray(probs, dtype=np.float64)
    tiny = np.finfo(np.float32).tiny
    return np.log(np.maximum(probs, tiny)).astype(np.float32)


def _split(logits, labels, n_val: int, descr: str, **extra) -> Bunch:
    order = np.random.RandomState(0).permutation(len(labels))
    val, test = order[:n_val], order[n_val:]
    return _bunch(logits[val], labels[val], logits[test], labels[test], descr, **extra)


def _bunch(val_logits, val_labels, test_logits, test_labels, descr, **extra):
    return Bunch(
        val_logits=np.ascontiguousarray(val_logits, dtype=np.float32),
        val_labels=np.asarray(val_labels, dtype=np.int64).ravel(),
        test_logits=np.ascontiguousarray(test_logits, dtype=np.float32),
        test_labels=np.asarray(test_labels, dtype=np.int64).ravel(),
        DESCR=descr,
        **extra,
    )


def _return(bunch: Bunch, return_X_y: bool):
    if return_X_y:
        return (
            bunch.val_logits,
            bunch.val_labels,
            bunch.test_logits,
            bunch.test_labels,
        )
    return bunch


_PARAMETERS = """
    Parameters
    ----------
    data_home : str or path-like, default=None
        Where the file is cached (:func:`get_data_home`).
    download_if_missing : bool, default=True
        Download the file when it is not cached; else raise ``OSError``.
    return_X_y : bool, default=False
        Return ``(val_logits, val_labels, test_logits, test_labels)``.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``val_logits``, ``val_labels``, ``test_logits``, ``test_labels``
        (float32 logits, int64 labels) and ``DESCR``."""


def _documented(func):
    func.__doc__ = func.__doc__.replace("    {parameters}", _PARAMETERS.strip("\n"))
    return func


@_documented
def fetch_densenet40_cifar10(
    *, data_home=None, download_if_missing=True, return_X_y=False
):
    """DenseNet-40 on CIFAR-10: Guo et al.'s (2017) setup, real logits.

    markus93/NN_calibration's logits (MIT licence): validation = 5,000 images
    held out of the training set, test = the 10,000 test images; 92.4% test
    accuracy. The same numbers as the file ``densenet40_cifar10.npz`` that
    the tests and docs read when it is in the data home.

    {parameters}

    Examples
    --------
    >>> from skts.datasets import fetch_densenet40_cifar10
    >>> data = fetch_densenet40_cifar10()  # doctest: +SKIP
    >>> data.val_logits.shape, data.test_logits.shape  # doctest: +SKIP
    ((5000, 10), (10000, 10))
    """
    descr = "DenseNet-40, CIFAR-10 (markus93/NN_calibration, MIT)"
    # A converted copy (the project's shared/data file) is read as it is.
    converted = Path(get_data_home(data_home)) / "densenet40_cifar10.npz"
    if converted.exists():
        with np.load(converted, allow_pickle=False) as f:
            bunch = _bunch(
                f["val_logits"],
                f["val_labels"],
                f["test_logits"],
                f["test_labels"],
                descr,
            )
        return _return(bunch, return_X_y)
    path = _fetch("densenet40_cifar10", data_home, download_if_missing)
    (val_logits, val_labels), (test_logits, test_labels) = _unpickle_arrays(path)
    bunch = _bunch(val_logits, val_labels, test_logits, test_labels, descr)
    return _return(bunch, return_X_y)


def _efs(name, descr, data_home, download_if_missing, return_X_y):
    path = _fetch(name, data_home, download_if_missing)
    with np.load(path, allow_pickle=False) as f:
        logits, labels = _logits(f["predictions"]), f["ground_truth"]
    return _return(_split(logits, labels, 5000, descr), return_X_y)


@_documented
def fetch_wideresnet16_cifar10(
    *, data_home=None, download_if_missing=True, return_X_y=False
):
    """WideResNet-16-4 on CIFAR-10: log-probabilities of the 10,000 test images.

    From netcal's calibration-framework (Apache-2.0). Only test-set outputs
    are published: they are split at random (``RandomState(0)``) into 5,000
    validation and 5,000 test rows.

    {parameters}

    Examples
    --------
    >>> from skts.datasets import fetch_wideresnet16_cifar10
    >>> data = fetch_wideresnet16_cifar10()  # doctest: +SKIP
    >>> data.val_logits.shape  # doctest: +SKIP
    (5000, 10)
    """
    descr = "WideResNet-16-4, CIFAR-10 (EFS-OpenSource/calibration-framework)"
    return _efs(
        "wideresnet16_cifar10", descr, data_home, download_if_missing, return_X_y
    )


@_documented
def fetch_densenet100_cifar100(
    *, data_home=None, download_if_missing=True, return_X_y=False
):
    """DenseNet-BC-100 on CIFAR-100: log-probabilities of the 10,000 test images.

    From netcal's calibration-framework (Apache-2.0), split at random
    (``RandomState(0)``) into 5,000 validation and 5,000 test rows.

    {parameters}

    Examples
    --------
    >>> from skts.datasets import fetch_densenet100_cifar100
    >>> data = fetch_densenet100_cifar100()  # doctest: +SKIP
    >>> data.val_logits.shape  # doctest: +SKIP
    (5000, 100)
    """
    descr = "DenseNet-BC-100, CIFAR-100 (EFS-OpenSource/calibration-framework)"
    return _efs(
        "densenet100_cifar100", descr, data_home, download_if_missing, return_X_y
    )


@_documented
def fetch_vgg16_cifar10(*, data_home=None, download_if_missing=True, return_X_y=False):
    """VGG-16 on CIFAR-10 (Kumar et al. 2019): log-probabilities, 10,000 test images.

    From p-lambda/verified_calibration (MIT), split at random
    (``RandomState(0)``) into 5,000 validation and 5,000 test rows.

    {parameters}

    Examples
    --------
    >>> from skts.datasets import fetch_vgg16_cifar10
    >>> data = fetch_vgg16_cifar10()  # doctest: +SKIP
    >>> data.test_logits.shape  # doctest: +SKIP
    (5000, 10)
    """
    path = _fetch("vgg16_cifar10", data_home, download_if_missing)
    probs, labels = _unpickle_arrays(path)
    descr = "VGG-16, CIFAR-10 (p-lambda/verified_calibration, MIT)"
    return _return(_split(_logits(probs), np.ravel(labels), 5000, descr), return_X_y)


@_documented
def fetch_cleanlab_cifar10(
    *, data_home=None, download_if_missing=True, return_X_y=False
):
    """Cross-validated CIFAR-10 test probabilities (cleanlab's label errors).

    From cleanlab/label-errors (Apache-2.0): out-of-fold probabilities of the
    10,000 test images with their original labels, split at random
    (``RandomState(0)``) into 5,000 validation and 5,000 test rows.

    {parameters}

    Examples
    --------
    >>> from skts.datasets import fetch_cleanlab_cifar10
    >>> data = fetch_cleanlab_cifar10()  # doctest: +SKIP
    >>> data.val_labels.shape  # doctest: +SKIP
    (5000,)
    """
    probs = np.load(
        _fetch("cleanlab_cifar10_probs", data_home, download_if_missing),
        allow_pickle=False,
    )
    labels = np.load(
        _fetch("cleanlab_cifar10_labels", data_home, download_if_missing),
        allow_pickle=False,
    )
    descr = "cross-validated CIFAR-10 probabilities (cleanlab/label-errors)"
    return _return(_split(_logits(probs), labels, 5000, descr), return_X_y)


def load_digits_logits(*, return_X_y=False):
    """Logits of a small network trained on scikit-learn's digits (shipped).

    A multilayer perceptron (scikit-learn's ``MLPClassifier``, one hidden
    layer of 32 units) trained on 600 of the 1,797 digit images by
    ``scripts/make_digits_logits.py``; its logits (the output layer before
    the softmax) on 600 validation and 597 test images. Real, overconfident
    network outputs that need no download (BSD-3-Clause, like skts).

    Parameters
    ----------
    return_X_y : bool, default=False
        Return ``(val_logits, val_labels, test_logits, test_labels)``.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``val_logits``, ``val_labels``, ``test_logits``, ``test_labels`` and
        ``DESCR``.

    Examples
    --------
    >>> from skts import TemperatureScaler
    >>> from skts.datasets import load_digits_logits
    >>> data = load_digits_logits()
    >>> data.val_logits.shape, data.test_logits.shape
    ((600, 10), (597, 10))
    >>> ts = TemperatureScaler().fit(data.val_logits, data.val_labels)
    >>> bool(ts.temperature_ > 1)  # the network is overconfident
    True
    """
    source = resources.files("skts").joinpath("data", "digits_logits.npz")
    with source.open("rb") as fh, np.load(fh, allow_pickle=False) as f:
        bunch = _bunch(
            f["val_logits"],
            f["val_labels"],
            f["test_logits"],
            f["test_labels"],
            "MLP on scikit-learn's digits (scripts/make_digits_logits.py)",
        )
    return _return(bunch, return_X_y)
