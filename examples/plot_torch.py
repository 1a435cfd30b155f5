"""
Calibrating a PyTorch model: images, pixels and tokens
=======================================================

A small convolutional network is trained on scikit-learn's handwritten
digits until it fits its training set, the regime in which networks become
overconfident. We calibrate it straight from its validation ``DataLoader``
with :func:`skts.torch.calibrate`, compare the result with the recipe of the
temperature-scaling paper's own code (an LBFGS fit of ``T`` started at 1.5),
export the calibrated module and reload it, and then calibrate the same
kind of network on per-pixel logits (a segmentation) and on per-token logits
(sequences with padding), where positions labelled ``-100`` are left out, as
``CrossEntropyLoss`` leaves them out.

Everything runs on the CPU in seconds.
"""

# %%
# A network trained until it is overconfident
# -------------------------------------------
import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from skts import TemperatureCurveDisplay
from skts.metrics import expected_calibration_error
from skts.torch import TemperatureScaledModule, calibrate

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = (X / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
X_train, X_rest, y_train, y_rest = train_test_split(
    X, y, train_size=0.5, stratify=y, random_state=0
)
X_val, X_test, y_val, y_test = train_test_split(
    X_rest, y_rest, test_size=0.5, stratify=y_rest, random_state=0
)


def loader(x, labels, shuffle=False):
    data = TensorDataset(torch.from_numpy(x), torch.from_numpy(labels))
    return DataLoader(data, batch_size=64, shuffle=shuffle)


def train(model, batches, epochs, loss=nn.functional.cross_entropy):
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(epochs):
        for xb, yb in batches:
            opt.zero_grad()
            loss(model(xb), yb).backward()
            opt.step()
    return model


cnn = nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1),
    nn.ReLU(),
    nn.Dropout(0.25),
    nn.Flatten(),
    nn.Linear(32 * 64, 10),
)
cnn = train(cnn, loader(X_train, y_train, shuffle=True), epochs=100)

# %%
# Calibrated from its validation loader
# -------------------------------------
# ``calibrate`` runs the model in ``eval()`` mode under ``torch.no_grad()``
# (dropout off) and puts its mode back; the logits stay on the host in
# their own precision, and ``T`` is chosen by skts's exact rule.
calibrated = calibrate(cnn, loader(X_val, y_val))
T = calibrated.scaler.temperature_
print(f"T = {T:.4f}, validation NLL {calibrated.scaler.validation_loss_:.4f}")


# %%
# The paper's recipe on the same logits
# -------------------------------------
# ``ModelWithTemperature.set_temperature`` of the paper's code
# (gpleiss/temperature_scaling) optimises ``T`` itself with
# ``optim.LBFGS(lr=0.01, max_iter=50)`` from ``T = 1.5``. We run it on the
# very logits ``calibrate`` saw, and compare on the held-out test set.
def lbfgs_recipe(logits, labels, start=1.5):
    t = nn.Parameter(torch.ones(1) * start)
    opt = torch.optim.LBFGS([t], lr=0.01, max_iter=50)

    def closure():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(logits / t, labels)
        loss.backward()
        return loss

    opt.step(closure)
    return float(t.detach())


cnn.eval()
with torch.no_grad():
    val_logits = cnn(torch.from_numpy(X_val))
    test_logits = cnn(torch.from_numpy(X_test))
recipe = {
    start: lbfgs_recipe(val_logits, torch.from_numpy(y_val), start)
    for start in (1.5, 1.0)
}


def test_scores(t):
    z = test_logits / t
    nll = nn.functional.cross_entropy(z, torch.from_numpy(y_test)).item()
    ece = expected_calibration_error(
        y_test, torch.softmax(z, 1).numpy().astype(np.float64)
    )
    return nll, ece


print(f"{'':28s}{'T':>8s}{'test NLL':>10s}{'test ECE':>10s}")
for name, t in [
    ("uncalibrated", 1.0),
    ("skts.torch.calibrate", T),
    ("paper's LBFGS, from 1.5", recipe[1.5]),
    ("paper's LBFGS, from 1.0", recipe[1.0]),
]:
    nll, ece = test_scores(t)
    print(f"{name:28s}{t:8.4f}{nll:10.4f}{ece:10.2%}")

# %%
# The LBFGS recipe stops where its 50 steps of ``lr=0.01`` take it, which
# depends on where it starts, and is not the minimiser of the validation
# loss; skts's ``T`` is the exact minimiser over its candidate grid. The
# validation loss as a function of ``T`` shows where each one stops. (The
# test log-loss is the score to compare: at this accuracy, the ECE of 450
# test images counts a handful of mistakes and moves by a percent with any
# of them.)
fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
TemperatureCurveDisplay.from_logits(
    val_logits,
    y_val,
    temperatures=np.geomspace(0.5, 5, 400),
    temperature=T,
    name="validation loss",
    ax=ax,
)
for start, style in [(1.5, "--"), (1.0, ":")]:
    ax.axvline(recipe[start], color="0.4", linestyle=style, label=f"LBFGS from {start}")
ax.legend()
ax.set_title("Where each fit stops (CNN on digits)")
plt.show()

# %%
# Saved, exported and reloaded
# ----------------------------
# The result is an ``nn.Module``; the temperature is a registered buffer,
# so it travels in the ``state_dict`` and through ``torch.export``.
state = calibrated.state_dict()
reloaded = TemperatureScaledModule(cnn, 1.0)
reloaded.load_state_dict(state)
x = torch.from_numpy(X_test[:16])
program = torch.export.export(reloaded.eval(), (x,))
same = torch.equal(program.module()(x), calibrated.eval()(x))
print(f"buffer T = {float(reloaded.temperature):.4f}; exported outputs equal: {same}")


# %%
# Per-pixel logits: a tiny segmentation
# -------------------------------------
# Each pixel of a digit image is labelled with the digit where there is ink,
# with a background class (10) where there is none, and left unlabelled
# (``-100``) where the ink is faint: the ambiguous boundary that annotators
# skip. A fully convolutional network returns ``(N, 11, 8, 8)`` logits, the
# classes on axis 1, as ``CrossEntropyLoss`` takes them.
def pixel_labels(images, digits):
    ink = images[:, 0]
    labels = np.where(ink > 0.25, digits[:, None, None], 10)
    labels[(ink > 0) & (ink <= 0.25)] = -100
    return labels


fcn = nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1),
    nn.ReLU(),
    nn.Conv2d(32, 32, 3, padding=1),
    nn.ReLU(),
    nn.Conv2d(32, 11, 1),
)
seg_train = loader(X_train, pixel_labels(X_train, y_train), shuffle=True)
pixel_loss = nn.CrossEntropyLoss(ignore_index=-100)
fcn = train(fcn, seg_train, epochs=30, loss=pixel_loss)
seg = calibrate(fcn, loader(X_val, pixel_labels(X_val, y_val)), ignore_index=-100)
fcn.eval()
with torch.no_grad():
    z_val = fcn(torch.from_numpy(X_val))
    z = fcn(torch.from_numpy(X_test))
labels = torch.from_numpy(pixel_labels(X_test, y_test))


def pixel_rows(logits, pixel_y):
    """The labelled pixels as rows (the recipe's loss needs them flat)."""
    rows = logits.movedim(1, -1).reshape(-1, logits.shape[1])
    flat = pixel_y.reshape(-1)
    return rows[flat != -100], flat[flat != -100]


recipe_t = lbfgs_recipe(
    *pixel_rows(z_val, torch.from_numpy(pixel_labels(X_val, y_val)))
)
test_rows, test_y = pixel_rows(z, labels)
print(f"{'pixels':28s}{'T':>8s}{'test NLL':>10s}{'test ECE':>10s}")
for name, t in [
    ("uncalibrated", 1.0),
    ("skts.torch.calibrate", seg.scaler.temperature_),
    ("paper's LBFGS, from 1.5", recipe_t),
]:
    nll = pixel_loss(z / t, labels).item()
    p = torch.softmax(test_rows / t, 1).numpy().astype(np.float64)
    ece = expected_calibration_error(test_y.numpy(), p, labels=range(11))
    print(f"{name:28s}{t:8.4f}{nll:10.4f}{ece:10.2%}")


# %%
# Per-token logits: sequences with padding
# ----------------------------------------
# Sequences of 2 to 6 digit images, padded to 6, are read by the same CNN one
# image (token) at a time: ``(batch, tokens, classes)`` logits, the classes
# last (``class_axis=-1``, as Hugging Face models return them), and the
# padding labelled ``-100``. The batches are dicts, as a Hugging Face
# collator makes them.
class Reader(nn.Module):
    def __init__(self, per_token):
        super().__init__()
        self.per_token = per_token

    def forward(self, images):  # (batch, tokens, 1, 8, 8) -> (batch, tokens, 10)
        b, n = images.shape[:2]
        return self.per_token(images.reshape(b * n, 1, 8, 8)).reshape(b, n, -1)


def sequences(images, digits, seed):
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(digits))
    batches = []
    for start in range(0, len(order) - 6 * 16, 6 * 16):
        take = order[start : start + 6 * 16]
        labels = digits[take].reshape(16, 6).copy()
        lengths = rng.integers(2, 7, size=16)
        labels[np.arange(6) >= lengths[:, None]] = -100  # padding
        tokens = torch.from_numpy(images[take].reshape(16, 6, 1, 8, 8))
        batches.append({"images": tokens, "labels": torch.from_numpy(labels)})
    return batches


val_batches = sequences(X_val, y_val, seed=1)
tok = calibrate(Reader(cnn), val_batches, class_axis=-1, ignore_index=-100)
with torch.no_grad():
    tz = torch.cat([Reader(cnn)(b["images"]) for b in val_batches])
ty = torch.cat([b["labels"] for b in val_batches])
kept = ty.reshape(-1) != -100
recipe_tok = lbfgs_recipe(tz.reshape(-1, 10)[kept], ty.reshape(-1)[kept])
skts_tok = tok.scaler.temperature_
print(f"tokens: skts T = {skts_tok:.4f}, paper's LBFGS T = {recipe_tok:.4f}")

# %%
# The token-level fit reads only the unpadded tokens (about two thirds of
# the validation images, in another order): the padding never reaches the
# loss, and ``T`` is that of those images.
