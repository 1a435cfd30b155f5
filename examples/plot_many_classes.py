"""
Many classes: a large vocabulary
================================

A language model's next-token distribution has tens of thousands of
classes. Temperature scaling applies unchanged; what changes is the size of
the logits. skts reads them a few times in float32 blocks, whatever the
number of candidate temperatures, and never makes a float64 copy.

Here, synthetic logits stand in for a model's: 20,000 positions over a
vocabulary of 2,000 tokens, sharper than the truth (labels are drawn from
``softmax(z / 1.7)``), stored as float32 as a network emits them.
"""

# %%
import time

import matplotlib.pyplot as plt
import numpy as np

from skts import ReliabilityDisplay, TemperatureCurveDisplay, TemperatureScaler
from skts.metrics import calibration_report

rng = np.random.default_rng(0)
n, vocab = 20_000, 2_000
z = rng.standard_normal((n, vocab), dtype=np.float32) * 3.0
z[:, :50] += 2.0  # a few frequent tokens, as in text
p_true = np.exp((z - z.max(axis=1, keepdims=True)) / 1.7)
p_true /= p_true.sum(axis=1, keepdims=True)
y = (p_true.cumsum(axis=1) < rng.random(n)[:, None]).sum(axis=1).clip(0, vocab - 1)
del p_true
half = n // 2
print(f"logits: {z.shape[0]} x {z.shape[1]} float32, {z.nbytes / 2**20:.0f} MiB")

# %%
# Fit on one half, judge on the other
# -----------------------------------
start = time.perf_counter()
scaler = TemperatureScaler().fit(z[:half], y[:half])
print(
    f"T = {scaler.temperature_:.3f} (the truth is 1.7), "
    f"fitted in {time.perf_counter() - start:.2f} s over 1001 candidates"
)
e = np.exp(z[half:] - z[half:].max(axis=1, keepdims=True))
before = e / e.sum(axis=1, keepdims=True)
after = scaler.predict_proba(z[half:])
for name, proba in [("before", before), ("after", after)]:
    r = calibration_report(y[half:], proba, labels=np.arange(vocab))
    print(
        f"{name:>6}: log-loss {r['log_loss']:.3f}  ECE {r['ece']:.3f}  "
        f"top-1 accuracy {r['accuracy']:.3f}"
    )

# %%
# With thousands of classes the top-label confidence is low and the
# class-wise view is too thin to read; the top-label diagram and the
# validation loss over the candidates tell the story.
fig, axes = plt.subplots(
    2, 2, figsize=(10, 6), height_ratios=[3, 1], layout="constrained"
)
first = ReliabilityDisplay.from_predictions(
    y[half:],
    before,
    labels=np.arange(vocab),
    name="before",
    n_bins=10,
    ax=axes[0, 0],
    hist_ax=axes[1, 0],
)
ReliabilityDisplay.from_predictions(
    y[half:],
    after,
    labels=np.arange(vocab),
    name=f"T = {scaler.temperature_:.2f}",
    kind="line",
    n_bins=10,
    ax=axes[0, 0],
    hist_ax=axes[1, 0],
)
gs = axes[0, 1].get_gridspec()
for ax in axes[:, 1]:
    ax.remove()
curve_ax = fig.add_subplot(gs[:, 1])
TemperatureCurveDisplay.from_estimator(scaler, z[:half], y[:half], ax=curve_ax)
plt.show()
