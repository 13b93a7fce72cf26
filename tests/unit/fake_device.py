"""A second device simulated on the CPU, to catch device mixing without an accelerator.

``FakeAccelerator`` is a torch function mode that tags every tensor either *accelerator* or
*host* and follows the tags through every torch call:

- the parameters and buffers of the given modules start on the accelerator; any other tensor
  made before the mode, or by a factory without ``device=``, or by ``from_numpy``, is on the
  host;
- ``tensor.device`` answers ``ACCEL`` (``cpu:0``, a device that compares unequal to ``cpu``)
  for accelerator tensors, so ``x.to(model.device)``, ``torch.zeros(..., device=model.device)``
  and ``.to(other.device)`` land on the accelerator, and ``.cpu()``, ``.to("cpu")`` on the host;
- any other call takes the side of its tensor arguments and raises ``DeviceMismatch`` when
  they sit on both sides (0-dim host tensors excepted, as CUDA accepts CPU scalars), as CUDA
  does for ``cpu_tensor[cuda_index]``; ``.numpy()`` of an accelerator tensor raises too.

It is stricter than CUDA in one way: a host index into an accelerator tensor also raises.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

ACCEL = torch.device("cpu", 0)
"""The simulated accelerator: computes on the CPU, compares unequal to ``cpu``."""

_TAG = "_fake_accelerator"
_MOVES = {torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda, torch.Tensor.copy_}


class DeviceMismatch(AssertionError):
    """A call mixed accelerator and host tensors."""


def on_accelerator(t: torch.Tensor) -> bool:
    """Whether ``t`` sits on the simulated accelerator."""
    return getattr(t, _TAG, False)


def _target(func, args, kwargs) -> bool | None:
    """Where a move or factory call puts its result: True accelerator, False host, None: it
    follows its tensor arguments."""
    if func is torch.Tensor.cpu:
        return False
    if func is torch.Tensor.cuda:
        return True
    if func is torch.Tensor.to:
        for a in [*args[1:], kwargs.get("device"), kwargs.get("other")]:
            if isinstance(a, torch.Tensor):
                return on_accelerator(a)
            if isinstance(a, (str, torch.device)):
                return torch.device(a) == ACCEL
        return on_accelerator(args[0])
    if kwargs.get("device") is not None:
        return torch.device(kwargs["device"]) == ACCEL
    return None


class FakeAccelerator(TorchFunctionMode):
    """Run a block as if ``modules`` sat on an accelerator (see the module docstring)."""

    def __init__(self, *modules: torch.nn.Module) -> None:
        super().__init__()
        self.tensors = [t for m in modules for t in [*m.parameters(), *m.buffers()]]

    def __enter__(self):
        for t in self.tensors:
            setattr(t, _TAG, True)
        return super().__enter__()

    def __exit__(self, *exc):
        for t in self.tensors:
            setattr(t, _TAG, False)
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__self__", None) is torch.Tensor.device:  # the property's getter
            return ACCEL if on_accelerator(args[0]) else func(*args)
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        if func is torch.Tensor.numpy and on_accelerator(args[0]):
            raise DeviceMismatch("numpy() of an accelerator tensor")
        place = _target(func, args, kwargs)
        if place is None:
            sides = {on_accelerator(t) for t in inputs if t.dim() > 0 or on_accelerator(t)}
            if len(sides) > 1 and func not in _MOVES:
                shapes = [(tuple(t.shape), ("host", "accel")[on_accelerator(t)]) for t in inputs]
                raise DeviceMismatch(f"{getattr(func, '__name__', func)} mixes devices: {shapes}")
            place = sides == {True}
        out = func(*args, **kwargs)
        if func in _MOVES and out is args[0] and place != on_accelerator(out):
            out = out.view_as(out)  # a move between the two sides gives a new tensor
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and func is not torch.Tensor.copy_:
                setattr(t, _TAG, place)
        return out
