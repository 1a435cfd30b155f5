"""skts.torch and per-position logits: what they cost beside what they replace.

1. Segmentation layout: ``TemperatureScaler().fit`` on ``(N, K, H, W)``
   float32 logits (classes on axis 1, read in place block by block) against
   the same fit on the same logits already laid out as ``(M, K)`` rows
   (target: at most 1.5x), with and without ``ignore_index``.
2. ``skts.torch.calibrate(model, loader)`` against one inference pass of the
   same model over the same loader (``torch.no_grad()``, ``eval()``), for
   ``store="memory"`` and ``store="disk"`` (target: at most 1.10x), with the
   host memory each adds (target: the logits in their own dtype plus at
   most 64 MiB). ``touch`` only fills fresh memory of the logits' size: the
   floor of any store that keeps them. The model is a nearly free MLP (the
   worst case: everything ``calibrate`` adds shows) or a small segmentation
   network (``--model segnet``).

3. ``--recipe``: the paper's code (gpleiss/temperature_scaling,
   ``ModelWithTemperature.set_temperature``: ``optim.LBFGS([T], lr=0.01,
   max_iter=50)`` from ``T = 1.5``, and from 1.0) against skts's exact fit,
   on the real CIFAR logits (``../shared/data`` or ``$SKTS_DATA``): the
   ``T`` each finds, the validation NLL it reaches, and the test NLL and
   ECE (15 bins).

Interleaved rounds in one process, min and median per job, the load average
printed; memory: each job in a fresh process, the peak growth of its
anonymous resident memory (``RssAnon``, sampled every 5 ms: the heap; the
pages of a memory-mapped file are the page cache's). Threads: torch and
skts both at the same thread count.

    python benchmarks/bench_torch.py --layout          # 1.
    python benchmarks/bench_torch.py --loader --gb 2   # 2. (2 GB of logits)
    python benchmarks/bench_torch.py --loader --gb 2 --model segnet

``--load N`` runs N busy processes during the timings (a machine in use).
    python benchmarks/bench_torch.py --recipe          # 3.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import threading
import time

import numpy as np
from bench_metrics import busy_processes  # (the same load as the metrics benchmark)


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def rounds(jobs: dict, n_rounds: int) -> dict:
    times = {name: [] for name in jobs}
    names = list(jobs)
    for r in range(n_rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t0 = time.perf_counter()
            jobs[name]()
            times[name].append(time.perf_counter() - t0)
    return times


def layout(args) -> None:
    from skts import TemperatureScaler

    rng = np.random.default_rng(0)
    n, k, h, w = args.shape
    z = (rng.normal(size=(n, k, h, w)) * 3).astype(np.float32)
    y = z.argmax(axis=1)
    flip = rng.random(y.shape) < 0.3
    y[flip] = rng.integers(0, k, size=int(flip.sum()))
    rows = np.ascontiguousarray(np.moveaxis(z, 1, -1).reshape(-1, k))
    labels = y.reshape(-1)
    y_pad = y.copy()
    y_pad[:, :, : w // 8] = -100
    kept = y_pad.reshape(-1) != -100
    rows_kept, labels_kept = np.ascontiguousarray(rows[kept]), labels[kept]
    jobs = {
        "(M, K) rows": lambda: TemperatureScaler().fit(rows, labels),
        "(N, K, H, W)": lambda: TemperatureScaler().fit(z, y),
        "(M', K) kept rows": lambda: TemperatureScaler().fit(rows_kept, labels_kept),
        "(N, K, H, W) ignore_index": lambda: TemperatureScaler(ignore_index=-100).fit(
            z, y_pad
        ),
    }
    print(
        f"layout: logits {z.shape} float32 ({z.nbytes / 2**20:.0f} MiB); load {load()}"
    )
    times = rounds(jobs, args.rounds)
    print(f"load after: {load()}")
    for name, t in times.items():
        print(
            f"  {name:28s} min {min(t) * 1e3:8.1f} ms  "
            f"median {statistics.median(t) * 1e3:8.1f} ms"
        )
    for a, b in (
        ("(N, K, H, W)", "(M, K) rows"),
        ("(N, K, H, W) ignore_index", "(M', K) kept rows"),
    ):
        ratio = [x / y for x, y in zip(times[a], times[b], strict=True)]
        print(
            f"  {a} / {b}: min {min(ratio):.2f}  median {statistics.median(ratio):.2f}"
        )


def _model_and_loader(args):
    """The model and a loader yielding ``args.gb`` GiB of float32 logits.

    ``mlp``: ``(batch, 64)`` inputs to ``(batch, K)`` logits through one
    hidden layer of 128: nearly free, so that everything ``calibrate`` adds
    shows (the worst case). ``segnet``: a small fully convolutional
    encoder-decoder (three 3x3 convolutions, one down- and one up-sampling,
    a 1x1 head; about 0.31 GFLOP per 128 x 128 image, as cheap per pixel as
    torchvision's cheapest segmentation model, LR-ASPP MobileNetV3, within
    a factor of two) and ``unet`` (:func:`_UNet`, 3.2 GFLOP per image; FCN
    and DeepLabV3 ResNet-50 take 3-6 times more per pixel) give ``(batch,
    21, 128, 128)`` per-pixel logits, classes on axis 1: what ``calibrate``
    is for. (GFLOP: two per multiply-add.)
    """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader

    torch.manual_seed(0)
    if args.model == "mlp":
        k, per_input, d = args.k, args.k, 64
        model = nn.Sequential(nn.Linear(d, 128), nn.ReLU(), nn.Linear(128, k))
        shape, label_shape = (d,), ()
    elif args.model == "unet":
        k, side = 21, 128
        per_input = k * side * side
        model = _UNet(k)
        shape, label_shape = (3, side, side), (side, side)
    else:
        k, side = 21, 128
        per_input = k * side * side
        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
            nn.ConvTranspose2d(32, 16, 2, stride=2), nn.ReLU(),
            nn.Conv2d(16, k, 1),
        )  # fmt: skip
        shape, label_shape = (3, side, side), (side, side)
    batch = args.batch
    n = int(args.gb * 2**30 / (4 * per_input))
    n -= n % batch

    # Inputs are generated per batch (the dataset would be larger than the logits).
    class Synthetic(torch.utils.data.Dataset):
        def __len__(self):
            return n // batch

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            x = torch.randn(batch, *shape, generator=g)
            return x, torch.randint(0, k, (batch, *label_shape), generator=g)

    loader = DataLoader(Synthetic(), batch_size=None)
    return model, loader, n * per_input // k, k


def _UNet(k: int):
    """A small U-Net (Ronneberger et al. 2015, at half its width and two
    levels deep instead of four): two 3x3 convolutions per level, 32, 64
    and 128 channels, skip connections, a 1x1 head: about 3.2 GFLOP per 128
    x 128 image (the original takes several times more)."""
    import torch
    from torch import nn

    def twice(a, b):
        return nn.Sequential(
            nn.Conv2d(a, b, 3, padding=1), nn.ReLU(),
            nn.Conv2d(b, b, 3, padding=1), nn.ReLU(),
        )  # fmt: skip

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.down1, self.down2, self.bottom = (
                twice(3, 32),
                twice(32, 64),
                twice(64, 128),
            )
            self.up2, self.dec2 = (
                nn.ConvTranspose2d(128, 64, 2, stride=2),
                twice(128, 64),
            )
            self.up1, self.dec1 = nn.ConvTranspose2d(64, 32, 2, stride=2), twice(64, 32)
            self.head = nn.Conv2d(32, k, 1)

        def forward(self, x):
            a = self.down1(x)
            b = self.down2(nn.functional.max_pool2d(a, 2))
            c = self.bottom(nn.functional.max_pool2d(b, 2))
            b = self.dec2(torch.cat([self.up2(c), b], 1))
            a = self.dec1(torch.cat([self.up1(b), a], 1))
            return self.head(a)

    return UNet()


def _inference(model, loader):
    import torch

    model.eval()
    with torch.no_grad():
        for x, _ in loader:
            model(x)


def loader_job(args) -> None:
    """One job in this process (a fresh one per job: the memory is its own)."""
    import torch

    from skts.torch import calibrate

    torch.set_num_threads(args.threads)
    model, loader, m, k = _model_and_loader(args)
    # Peak anonymous memory (heap: what the process allocates; the pages of
    # a memory-mapped file are the kernel's page cache, counted apart),
    # sampled every 5 ms.
    peak, done = [anon()], threading.Event()

    def sample():
        while not done.wait(0.005):
            peak[0] = max(peak[0], anon())

    base = peak[0]
    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    t0 = time.perf_counter()
    if args.job == "inference":
        _inference(model, loader)
    elif args.job == "touch":  # the floor of any in-memory store: fresh memory
        from skts.torch import _fresh, _Store

        rows = _Store.CHUNK_BYTES // (4 * k)
        kept = [_fresh((rows, k), np.float32) for _ in range(-(-m // rows))]
        for c in kept:
            c.fill(1.0)
    else:
        calibrate(model, loader, store=args.job, n_jobs=args.threads)
    took = time.perf_counter() - t0
    done.set()
    watcher.join()
    grown = (max(peak[0], anon()) - base) / 1024
    print(f"{args.job} {took:.3f} {grown:.1f} {m * k * 4 / 2**20:.1f}")


def anon() -> int:
    """This process's anonymous resident memory, KiB (Linux)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def loader(args) -> None:
    what = f"K={args.k}" if args.model == "mlp" else "(batch, 21, 128, 128)"
    print(
        f"loader: {args.gb} GB of float32 logits, model {args.model}, {what}, "
        f"batch {args.batch}, {args.threads} threads; load {load()}, "
        f"{args.load} busy processes"
    )
    times = {"inference": [], "memory": [], "disk": [], "touch": []}
    memory = {}
    for r in range(args.rounds):
        for job in list(times)[r % 4 :] + list(times)[: r % 4]:
            out = subprocess.run(
                [sys.executable, __file__, "--job", job, "--gb", str(args.gb),
                 "--k", str(args.k), "--batch", str(args.batch),
                 "--threads", str(args.threads), "--model", args.model],
                capture_output=True, text=True, check=True,
            ).stdout.split()  # fmt: skip
            times[job].append(float(out[1]))
            memory[job] = (float(out[2]), float(out[3]))
    print(f"load after: {load()}")
    for job, t in times.items():
        grown, logits = memory[job]
        print(
            f"  {job:10s} min {min(t):7.2f} s  median {statistics.median(t):7.2f} s  "
            f"peak anonymous memory growth {grown:6.0f} MiB (logits {logits:.0f} MiB)"
        )
    for job in ("memory", "disk"):
        ratio = [a / b for a, b in zip(times[job], times["inference"], strict=True)]
        print(
            f"  calibrate(store={job!r}) / inference: min {min(ratio):.3f}  "
            f"median {statistics.median(ratio):.3f}"
        )
    floor = [1 + t / a for a, t in zip(times["inference"], times["touch"], strict=True)]
    print(
        f"  (inference + filling fresh memory of the logits' size) / inference: "
        f"min {min(floor):.3f}  median {statistics.median(floor):.3f}"
    )


def recipe(args) -> None:
    import torch
    from torch import nn

    from skts import TemperatureScaler
    from skts.metrics import expected_calibration_error

    folder = os.environ.get("SKTS_DATA") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data"
    )

    def lbfgs(logits, labels, start):
        t = nn.Parameter(torch.ones(1) * start)
        opt = torch.optim.LBFGS([t], lr=0.01, max_iter=50)

        def closure():
            opt.zero_grad()
            loss = nn.functional.cross_entropy(logits / t, labels)
            loss.backward()
            return loss

        opt.step(closure)
        return float(t.detach())

    for name in ("densenet40_cifar10", "playground_cifar100"):
        path = os.path.join(folder, f"{name}.npz")
        if not os.path.exists(path):
            print(f"{name}: {path} not found (see docs/data.md)")
            continue
        d = np.load(path)
        zv, yv = torch.from_numpy(d["val_logits"]), torch.from_numpy(d["val_labels"])
        zt, yt = torch.from_numpy(d["test_logits"]), torch.from_numpy(d["test_labels"])
        fits = {
            "uncalibrated": 1.0,
            "skts (exact grid)": TemperatureScaler().fit(zv, yv).temperature_,
            "skts (continuous)": TemperatureScaler(solver="continuous")
            .fit(zv, yv)
            .temperature_,
            "paper's LBFGS from 1.5": lbfgs(zv, yv, 1.5),
            "paper's LBFGS from 1.0": lbfgs(zv, yv, 1.0),
        }
        print(f"{name}: validation {tuple(zv.shape)}, test {tuple(zt.shape)}")
        print(f"  {'':24s}{'T':>9s}{'val NLL':>10s}{'test NLL':>10s}{'test ECE':>10s}")
        for label, t in fits.items():
            with torch.no_grad():
                val = nn.functional.cross_entropy(zv / t, yv).item()
                test = nn.functional.cross_entropy(zt / t, yt).item()
                p = torch.softmax(zt.double() / t, 1).numpy()
            ece = expected_calibration_error(yt.numpy(), p)
            print(f"  {label:24s}{t:9.4f}{val:10.5f}{test:10.5f}{ece:10.2%}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layout", action="store_true")
    p.add_argument("--loader", action="store_true")
    p.add_argument("--recipe", action="store_true")
    p.add_argument("--shape", type=int, nargs=4, default=[32, 21, 128, 128])
    p.add_argument("--gb", type=float, default=2.0)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--batch", type=int, default=None, help="8192 (mlp), 8 (segnet)")
    p.add_argument("--model", choices=("mlp", "segnet", "unet"), default="mlp")
    p.add_argument("--load", type=int, default=0, help="busy processes meanwhile")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--job", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.batch is None:
        args.batch = 8192 if args.model == "mlp" else 8
    if args.job:
        return loader_job(args)
    with busy_processes(args.load):
        if args.recipe:
            recipe(args)
        if args.layout or not (args.loader or args.recipe):
            layout(args)
        if args.loader:
            loader(args)


if __name__ == "__main__":
    main()
