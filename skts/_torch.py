"""The calibrated module of :mod:`skts.torch` (imports torch: imported only
by ``skts.torch`` and :meth:`skts.TemperatureScaler.to_torch`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

__all__ = ["TemperatureScaledModule", "device_and_dtype"]


class TemperatureScaledModule(nn.Module):
    """A model whose logits are divided by a temperature.

    ``forward`` calls the model and divides what it returns by
    ``temperature``: a tensor of logits, the ``"logits"`` entry of a mapping
    (a Hugging Face ``ModelOutput``), or the first element of a tuple. The
    predicted labels never change.

    Parameters
    ----------
    model : torch.nn.Module
        The model to calibrate, a :class:`torch.nn.Module` (returned as is
        by :attr:`model`).

    temperature : float or tensor
        The temperature ``T > 0``.

    Attributes
    ----------
    temperature : torch.Tensor
        A registered buffer (in ``state_dict``, moved by ``.to()``): a 0-d
        tensor on the model's device, float32 (float64 for a float64 model).
        A 0-d tensor does not change the dtype of what it divides, so
        float16 and bfloat16 logits stay 16-bit, and ``T`` is not rounded to
        16 bits.

    scaler : skts.TemperatureScaler or None
        The fitted scaler, when :func:`calibrate` made the module.

    Examples
    --------
    >>> import torch
    >>> from skts.torch import TemperatureScaledModule
    >>> module = TemperatureScaledModule(torch.nn.Linear(3, 2), 2.0)
    >>> float(module.temperature)
    2.0
    >>> x = torch.ones(1, 3)
    >>> torch.allclose(module(x), module.model(x) / 2)
    True
    """

    __module__ = "skts.torch"  # (its public home)

    def __init__(self, model: nn.Module, temperature):
        super().__init__()
        value = float(temperature)
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"temperature must be finite and > 0; got {value!r}.")
        device, dtype = device_and_dtype(model)
        self.model = model
        self.register_buffer(
            "temperature", torch.tensor(value, dtype=dtype, device=device)
        )
        self.scaler = None

    def forward(self, *args, **kwargs):
        return _divided(self.model(*args, **kwargs), self.temperature)

    def __prepare_scriptable__(self):
        # TorchScript cannot compile *args: it scripts this one-tensor view
        # of the same model and buffer instead.
        return _ScriptableScaled(self.model, self.temperature)

    def extra_repr(self) -> str:
        return f"temperature={float(self.temperature):.6g}"


class _ScriptableScaled(nn.Module):
    """``TemperatureScaledModule`` for ``torch.jit.script``: one tensor in,
    the model's tensor of logits out, divided by the temperature."""

    def __init__(self, model: nn.Module, temperature: torch.Tensor):
        super().__init__()
        self.model = model
        self.register_buffer("temperature", temperature)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x) / self.temperature


def device_and_dtype(model: nn.Module):
    """The device of the model's first parameter or buffer, and the
    temperature's dtype (float64 for a float64 model, else float32)."""
    for t in (*model.parameters(), *model.buffers()):
        dtype = torch.float64 if t.dtype == torch.float64 else torch.float32
        return t.device, dtype
    return torch.device("cpu"), torch.float32


def _divided(out, temperature):
    """The model's output with its logits divided by ``temperature``."""
    if isinstance(out, torch.Tensor):
        return out / temperature
    if isinstance(out, Mapping) and "logits" in out:
        out["logits"] = out["logits"] / temperature
        return out
    if isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor):
        return (out[0] / temperature, *out[1:])
    raise TypeError(
        "the model returned a "
        f"{type(out).__name__}: TemperatureScaledModule divides a tensor of "
        "logits, the 'logits' entry of a mapping, or a tuple's first element."
    )
