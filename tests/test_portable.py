"""The kernel gives the same bits with every compiler, path and processor.

The cases below (every mode of the per-block pass, float32 and float64, few
and many classes, weights, known row maxima, extreme and tied logits; and
the elementary functions exp, expf, log and log1p over their domains) run
through the installed extension (``skts._kernel``, one block, one thread),
then through ``tests/kernel_bits.c`` built with each toolchain this machine
has: gcc and clang, the vectorised path and the portable ISO C11 path (under
``-std=c11 -pedantic-errors``), tcc (a compiler without GNU C), musl, gcc's
x86-64 clones run under ``qemu-x86_64`` on processors without AVX-512 and
without AVX, and a cross-compiled aarch64 build run under ``qemu-aarch64``.
Each must print exactly the extension's bits.

A missing toolchain skips its case with the reason; CI installs them all and
sets ``SKTS_REQUIRE_TOOLCHAINS=1``, which turns a missing one into a failure.
"""

import hashlib
import os
import shutil
import struct
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

from skts import _kernel

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "tests" / "kernel_bits.c", ROOT / "skts" / "_kernel.c"]
# The flags meson.build gives the kernel (meson's release level, -O3), and
# ISO C11.
FLAGS = ["-O3", "-std=c11", "-ffp-contract=off", "-fno-math-errno",
         "-fno-trapping-math"]
PORTABLE = ["-O2", "-std=c11", "-pedantic-errors", "-Wall", "-Werror",
            "-DSKTS_PORTABLE", "-ffp-contract=off", "-fno-math-errno",
            "-fno-trapping-math"]

# name: (compiler, flags, runner prefix); the runner is a tool to find too.
BUILDS = {
    "gcc": ("gcc", FLAGS, []),
    "gcc-portable": ("gcc", PORTABLE, []),
    "clang": ("clang", FLAGS, []),
    "clang-portable": ("clang", PORTABLE, []),
    # tcc defines no __GNUC__: the portable path by itself, C99 (tcc's own)
    "tcc": ("tcc", ["-DSKTS_PORTABLE"], []),
    # gcc's target_clones choose x86-64-v3 (AVX2) and the baseline (SSE2)
    # on these emulated processors
    "gcc-avx2": ("gcc", FLAGS, ["qemu-x86_64", "-cpu", "max"]),
    "gcc-sse2": ("gcc", FLAGS, ["qemu-x86_64", "-cpu", "qemu64"]),
    # musl (musllinux wheels): no ifunc, so no clones, the baseline ISA
    "musl": ("musl-gcc", [*FLAGS, "-static"], []),
    "aarch64": ("aarch64-linux-gnu-gcc", [*FLAGS, "-static"], ["qemu-aarch64"]),
    "aarch64-portable": (
        "aarch64-linux-gnu-gcc", [*PORTABLE, "-static"], ["qemu-aarch64"]),
}

HEADER = "<22q3d"
FIELDS = ("kind mode z_f32 n k nt single second moments facts first_spread "
          "pair deriv_at higher has_w has_mx_in want_mx want_span width "
          "log_out out_f32 slopes").split()


def _logits(rng, n, k, dtype, style):
    z = rng.normal(0, 3, (n, k))
    if style == "extreme":
        z[::3] *= 1e3
        z[1::5, :] = 0.0
        z[2::7, :1] = -1e30 if dtype == np.float64 else -3e38
        z[3::11] = 7.25  # every logit equal
        z[4::13, ::2] = -0.0
    elif style == "ties":
        z = np.round(z)
    return np.ascontiguousarray(z, dtype=dtype)


def _cases():
    rng = np.random.default_rng(20261201)
    cases = []
    for k in (1, 2, 3, 10, 17, 32, 33, 100, 1003):
        for dtype in (np.float32, np.float64):
            for style in ("normal", "extreme", "ties"):
                n = min(_kernel.rows_per_block(k), 37 if k > 32 else 101)
                z = _logits(rng, n, k, dtype, style)
                y = rng.integers(0, k, n).astype(np.int64)
                w = rng.random(n)
                w[::9] = 0.0
                w = None if style == "ties" else w
                total = float(n if w is None else w.sum())
                if total == 0.0:
                    continue
                mx = z.astype(np.float64).max(axis=1)
                betas = np.array([0.25, 1.0, 3.5])
                base = dict(z=z, y=y, w=w, total=total, betas=betas,
                            temps=1.0 / betas)
                # one case per read and its variants
                cases.append(dict(base, kind=0, mode=0, width=1, want_mx=1,
                                  want_span=1))
                cases.append(dict(base, kind=0, mode=0, width=1, mx_in=mx))
                for moments, facts in ((1, 1), (0, 0), (1, 0)):
                    cases.append(dict(base, kind=0, mode=1, width=5,
                                      moments=moments, facts=facts,
                                      want_span=1))
                cases.append(dict(base, kind=0, mode=1, width=7, higher=1,
                                  want_mx=1))
                pair = np.array([1.3, 1.3 * (1 + 1e-10)])
                cases.append(dict(base, kind=0, mode=1, width=5, pair=1,
                                  betas=pair, temps=1.0 / pair))
                for single, second, higher in ((0, 1, 0), (1, 1, 0),
                                               (0, 0, 0), (0, 1, 1)):
                    cases.append(dict(base, kind=0, mode=2,
                                      width=4 + 2 * higher, single=single,
                                      second=second, higher=higher,
                                      facts=1, mx_in=mx if k > 32 else None))
                cases.append(dict(base, kind=0, mode=3, width=4, single=1,
                                  first_spread=0, deriv_at=1))
                cases.append(dict(base, kind=0, mode=3, width=4, single=1,
                                  first_spread=-1, spread=2.5, deriv_at=-1,
                                  mx_in=mx))
                if k > 2:
                    cases.append(dict(base, kind=0, mode=3, width=5, single=1,
                                      first_spread=0, deriv_at=-1, slopes=1))
                for log, out in ((0, np.float64), (1, np.float32)):
                    cases.append(dict(base, kind=1, beta=0.7, log_out=log,
                                      out_f32=int(out == np.float32),
                                      out_dtype=out))
                cases.append(dict(base, kind=2))
    # the elementary functions over their whole domains (and their edges)
    edges = [0.0, -0.0, -1e-300, -5e-324, -708.0, -700.0, -87.0, -0.5]
    for which, lo, hi, dtype in ((0, -708.0, 0.0, np.float64),
                                 (1, -87.0, 0.0, np.float32),
                                 (2, 1.0, 1e300, np.float64),
                                 (3, 0.0, 1.0, np.float64)):
        if which == 2:
            x = np.concatenate([np.geomspace(lo, hi, 4000), [1.0, 1.5, 2.0, 0.75 * 2]])
        else:
            x = np.concatenate([np.linspace(lo, hi, 4000), rng.uniform(lo, hi, 4000)])
            x = np.concatenate([x, [e for e in edges if lo <= e <= hi]])
        z = np.ascontiguousarray(x.reshape(-1, 1), dtype=dtype)
        cases.append(dict(kind=3, mode=which, z=z, y=np.zeros(len(z), np.int64),
                          w=None, total=1.0, betas=np.zeros(0), temps=np.zeros(0)))
    return cases


_ELEMENTWISE = {0: "_exp64", 1: "_exp32", 2: "_log64", 3: "_log1p64"}


def _expected(case):
    """The installed extension's bits, as kernel_bits.c prints them."""
    z, y, w, total = case["z"], case["y"], case["w"], case["total"]
    betas, temps = case["betas"], case["temps"]
    common = dict(n_threads=1, row_max=case.get("mx_in"))
    values = []
    if case["kind"] == 1:
        out = _kernel.softmax(z, case["beta"], bool(case["log_out"]),
                              case["out_dtype"])
        values = out.astype(np.float64).ravel()
    elif case["kind"] == 2:
        values = [float(_kernel.varies(z, w))]
    elif case["kind"] == 3:
        function = getattr(_kernel, _ELEMENTWISE[case["mode"]])
        values = function(z.ravel()).astype(np.float64)
    else:
        mode = case["mode"]
        mx = np.zeros(len(z)) if case.get("want_mx") else None
        span = np.zeros(1) if case.get("want_span") else None
        found = None
        if mode == 0:
            sums = _kernel.nll(z, y, w, total, betas, temps, row_max_out=mx,
                               span_out=span, **common)
        elif mode == 1:
            sums, found = _kernel.slopes(
                z, y, w, total, betas, temps, moments=bool(case.get("moments", 1)),
                facts=bool(case.get("facts", 0)), pair=bool(case.get("pair", 0)),
                higher=bool(case.get("higher", 0)), row_max_out=mx,
                span_out=span, **common)
        elif mode == 2:
            sums, found = _kernel.derivatives(
                z, y, w, total, betas, temps, single=bool(case["single"]),
                second=bool(case["second"]), facts=bool(case["facts"]),
                higher=bool(case["higher"]), row_max_out=mx, span_out=span,
                **common)
        else:
            sums = _kernel.window(
                z, y, w, total, betas, temps, first_spread=case["first_spread"],
                spread=case.get("spread", 0.0), deriv_at=case["deriv_at"],
                slopes=bool(case.get("slopes", 0)), row_max_out=mx, **common)
        assert sums.shape[0] == 1  # one block, as kernel_bits.c runs it
        values = list(sums[0].ravel())
        if found is not None:
            values += [float(v) for v in found[0]]
        if mx is not None:
            values += list(mx)
        if span is not None:
            values += list(span)
    bits = np.asarray(values, dtype=np.float64).view(np.uint64)
    return "".join(f" {b:016x}" for b in bits)


def _write(cases, path):
    with open(path, "wb") as f:
        f.write(struct.pack("<q", len(cases)))
        for c in cases:
            z = c["z"]
            head = dict.fromkeys(FIELDS, 0)
            head.update(second=1, moments=1, deriv_at=-1)  # as _kernel._base
            head.update({key: int(c[key]) for key in FIELDS if key in c})
            head.update(z_f32=int(z.dtype == np.float32), n=z.shape[0],
                        k=z.shape[1], nt=len(c["betas"]),
                        has_w=int(c["w"] is not None),
                        has_mx_in=int(c.get("mx_in") is not None))
            f.write(struct.pack(HEADER, *(head[key] for key in FIELDS),
                                c.get("spread", 0.0), c.get("beta", 0.0),
                                c["total"]))
            f.write(z.tobytes())
            f.write(c["y"].astype("<i8").tobytes())
            for extra in (c["w"], c.get("mx_in")):
                if extra is not None:
                    f.write(np.asarray(extra, "<f8").tobytes())
            f.write(np.asarray(c["betas"], "<f8").tobytes())
            f.write(np.asarray(c["temps"], "<f8").tobytes())


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    if not all(p.exists() for p in SOURCES):
        pytest.skip("the kernel's C sources are not beside the tests "
                    "(a run against an installed wheel)")
    cases = _cases()
    path = tmp_path_factory.mktemp("bits") / "cases.bin"
    _write(cases, path)
    return path, [f"{i}:{_expected(c)}" for i, c in enumerate(cases)]


def _missing(tool):
    reason = (f"{tool} is not installed (apt-get install clang tcc musl-tools "
              "qemu-user gcc-aarch64-linux-gnu)")
    if os.environ.get("SKTS_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(reason + ", and SKTS_REQUIRE_TOOLCHAINS=1")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def binaries(cases, tmp_path_factory):
    """Every build this machine can make, compiled two at a time (the
    vectorised builds, three clones each, take the longest); gcc's one binary
    serves the three x86-64 processors."""
    from concurrent.futures import ThreadPoolExecutor

    folder = tmp_path_factory.mktemp("builds")
    wanted = {(c, tuple(f)) for c, f, _ in BUILDS.values() if shutil.which(c)}

    # (SKTS_BUILD_CACHE, set by .ci/run: the binaries depend only on the C
    # sources, the compiler and the flags, so the later jobs reuse them)
    cache = os.environ.get("SKTS_BUILD_CACHE")
    text = b"".join(p.read_bytes() for p in [*SOURCES, ROOT / "skts" / "_kernel.h"])

    def build(key):
        compiler, flags = key
        digest = hashlib.sha256(repr(key).encode() + text).hexdigest()[:20]
        exe = Path(cache or folder) / f"kernel_bits_{digest}"
        if exe.exists():
            return key, exe
        part = folder / exe.name  # (whole binaries only in the cache)
        done = subprocess.run(
            [compiler, *flags, f"-I{ROOT / 'skts'}", "-o", str(part),
             *map(str, SOURCES), "-lm"],
            capture_output=True, text=True, timeout=600,
        )
        if done.returncode != 0:
            return key, done.stderr
        if part != exe:
            # (a name of this process's own: .ci/run's two lanes may build
            # the same binary at once)
            staged = exe.with_suffix(f".{os.getpid()}.{threading.get_ident()}")
            shutil.copy2(part, staged)
            os.replace(staged, exe)
        return key, exe

    with ThreadPoolExecutor(2) as pool:
        # (the slowest first: gcc's three clones)
        order = sorted(wanted, key=lambda k: (k[1] != tuple(FLAGS), k[0] != "gcc", k))
        return dict(pool.map(build, order))


@pytest.mark.slow
@pytest.mark.parametrize("build", list(BUILDS))
def test_every_build_gives_the_extensions_bits(build, cases, binaries):
    path, expected = cases
    compiler, flags, runner = BUILDS[build]
    for tool in (compiler, *runner[:1]):
        if shutil.which(tool) is None:
            _missing(tool)
    exe = binaries[compiler, tuple(flags)]
    assert isinstance(exe, Path), f"{build} does not build:\n{exe}"
    run = subprocess.run([*runner, str(exe), str(path)], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    got = run.stdout.splitlines()
    assert len(got) == len(expected)
    wrong = [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]
    assert not wrong, f"{build}: {len(wrong)} cases differ: {got[wrong[0]][:200]}"


def test_the_cases_cover_every_mode_and_both_precisions(cases):
    # (the bits above would prove little if the cases missed a path)
    cs = _cases()
    modes = {(c["kind"], c.get("mode"), c["z"].dtype.name, c["z"].shape[1] > 32)
             for c in cs}
    assert {c["mode"] for c in cs if c["kind"] == 3} == set(_ELEMENTWISE)
    cs = [c for c in cs if c["kind"] != 3]
    for kind, mode in [(0, 0), (0, 1), (0, 2), (0, 3), (1, None), (2, None)]:
        for dtype in ("float32", "float64"):
            for wide in (False, True):
                assert (kind, mode, dtype, wide) in modes
    # and results that are not all zeros (a kernel that did nothing would
    # print zeros everywhere)
    _, expected = cases
    zero = " 0000000000000000"
    live = [line for line in expected if line.split(":", 1)[1].replace(zero, "")]
    assert len(live) > 0.9 * len(expected)


def test_the_portable_path_has_no_gnu_c(tmp_path):
    # -DSKTS_PORTABLE leaves no vector type, attribute or builtin: the
    # preprocessed kernel has none of GNU C's spellings.
    if not SOURCES[1].exists():
        pytest.skip("the kernel's C sources are not beside the tests")
    if shutil.which("gcc") is None:
        _missing("gcc")
    def ours(*defines):
        # the preprocessed kernel, without the lines of the system headers
        out = subprocess.run(
            ["gcc", "-E", "-std=c11", *defines, f"-I{ROOT / 'skts'}",
             str(SOURCES[1])],
            check=True, capture_output=True, text=True,
        ).stdout
        keep, lines = False, []
        for line in out.splitlines():
            if line.startswith("# "):
                keep = '_kernel.' in line.split('"')[1]
            elif keep:
                lines.append(line)
        return "\n".join(lines)

    portable = ours("-DSKTS_PORTABLE")
    assert "skts_block" in portable
    for word in ("__attribute__", "vector_size", "__builtin_", "target_clones"):
        assert word not in portable
    vectorised = ours()
    for word in ("__attribute__", "vector_size"):
        assert word in vectorised  # (the check can fail)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["x86-64-v3", "x86-64-v4"])
def test_no_vector_operation_is_lowered_piecewise(arch, tmp_path):
    # A GNU C vector type wider than the clone's registers is lowered
    # piecewise, lane by lane through memory for comparisons: with 64-byte
    # types the AVX2 clone ran a fit of 10,000 x 100 2.8x slower than the
    # AVX-512 one (docs/developers.md). gcc names every such operation.
    if not SOURCES[1].exists():
        pytest.skip("the kernel's C sources are not beside the tests")
    if shutil.which("gcc") is None:
        _missing("gcc")
    out = subprocess.run(
        ["gcc", "-O3", f"-march={arch}", "-DSKTS_NO_CLONES", "-std=gnu11",
         "-Wvector-operation-performance", f"-I{ROOT / 'skts'}", "-c",
         str(SOURCES[1]), "-o", str(tmp_path / "kernel.o")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lowered = [line for line in out.stderr.splitlines() if "piecewise" in line]
    assert not lowered, "\n".join(lowered[:5])
