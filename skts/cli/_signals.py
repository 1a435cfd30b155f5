"""Ctrl-C (SIGINT) and SIGTERM at any moment of a command: exit 130 (143)
and leave nothing behind.

A command runs inside :func:`catch` ... :func:`release`. In between,

- SIGINT raises :class:`KeyboardInterrupt` even when the command was started
  with SIGINT ignored (a shell's background job, ``nohup``): Python keeps an
  inherited "ignore", and a Ctrl-C late in ``skts apply`` was then lost;
- SIGTERM raises :class:`Terminated`, so the same ``finally`` blocks clean up;
- the bookkeeping of temporary files runs with both signals deferred
  (:func:`deferred`): a signal is noted, not raised, so it never falls
  between creating a temporary file and recording it, or inside the
  clean-up, and is raised when the block ends;
- publishing the outputs is the commit: from its first rename on, signals
  are noted until the command returns (:func:`hold`), and :func:`settle`
  then takes back what was published if one arrived, and raises it.

So either the command finishes with every output in place, or it exits 130
(143) with none. Deferring is done by the handlers themselves (Python runs
every signal handler in the main thread), not by a signal mask, which the
kernel would bypass by delivering the signal to another thread (OpenMP's,
PyTorch's). Outside the main thread nothing is changed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

_SIGNALS = tuple(
    s for s in (signal.SIGINT, getattr(signal, "SIGTERM", None)) if s is not None
)


class Terminated(BaseException):
    """SIGTERM, raised as an exception so that outputs are cleaned up."""


def _raise(signum, frame):
    _state.raised = signum
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated


def _note(signum, frame):
    if _state.arrived is None:
        _state.arrived = signum


class _State:
    def __init__(self):
        self.active = False
        self.held = False
        self.arrived = None  # a signal noted while deferred
        self.raised = None  # a signal raised during the command
        self.published: list[str] = []


_state = _State()


def _install(handler) -> dict:
    return {sig: signal.signal(sig, handler) for sig in _SIGNALS}


def catch():
    """Install the raising handlers for one command; returns what
    :func:`release` restores (``None`` outside the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = _install(_raise)
    _state.active, _state.held, _state.arrived = True, False, None
    _state.raised = None
    _state.published = []
    return previous


def _raise_arrived() -> None:
    sig, _state.arrived = _state.arrived, None
    if sig is not None:
        _raise(sig, None)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Note the signals during a few statements; one that arrived is raised
    when the block ends."""
    if not _state.active or _state.held:
        yield
        return
    _install(_note)
    try:
        yield
    finally:
        _install(_raise)
        _raise_arrived()


def hold() -> None:
    """Note the signals until the command ends (the commit has begun)."""
    if _state.active and not _state.held:
        _install(_note)
        _state.held = True


def published(path: str) -> None:
    """Record an output this command has published (taken back by
    :func:`settle` if a signal arrived)."""
    if _state.active:
        _state.published.append(path)


def settle() -> None:
    """At the end of a command: if a signal arrived while the outputs were
    being published (or after), take them back and raise it."""
    if _state.arrived is None:
        return
    for path in _state.published:
        with contextlib.suppress(OSError):
            os.unlink(path)
    _state.published = []
    _raise_arrived()


def reraise() -> None:
    """Inside an ``except`` clause: if a signal was raised during the
    command, raise its exception again (from the one being handled). A
    library may turn the signal's exception into one of its own: pybind11
    reports a KeyboardInterrupt during a module's import (scipy imports some
    lazily, in Dask's tasks too) as ``ImportError: initialization failed``."""
    if _state.raised is not None:
        _raise(_state.raised, None)


def release(previous) -> None:
    """Restore the handlers :func:`catch` replaced."""
    if previous is None:
        return
    for sig, handler in previous.items():
        signal.signal(sig, signal.SIG_DFL if handler is None else handler)
    _state.active = _state.held = False
    _state.arrived = _state.raised = None
    _state.published = []
