"""Host round trips for large device outputs: allocate page-locked mirrors once, then
copy into them at the bus rate (instead of `.cpu()`'s pageable staging per call)."""

from __future__ import annotations

from typing import Any

import torch


def _tensors(value: Any) -> tuple[list[torch.Tensor], bool]:
    if isinstance(value, torch.Tensor):
        return [value], False
    if isinstance(value, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in value):
        return list(value), True
    raise TypeError(f"expected a torch.Tensor or a tuple of them, got {type(value).__name__}")


def pinned_host_like(value: Any) -> Any:
    """Uninitialised host tensors shaped and typed like `value` (a tensor or a tuple),
    page-locked when CUDA is available (ordinary host memory otherwise). Allocate once
    and reuse: page-locked memory is a limited resource."""
    tensors, many = _tensors(value)
    pin = torch.cuda.is_available()
    host = [torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=pin) for t in tensors]
    return tuple(host) if many else host[0]


def copy_to_host(host: Any, value: Any) -> Any:
    """Copy `value` (a tensor or a tuple, on any device) into `host` (from
    `pinned_host_like`): non-blocking copies on the current stream, then one wait for
    that stream. Returns `host`."""
    targets, many = _tensors(host)
    sources, many_sources = _tensors(value)
    if many != many_sources or len(targets) != len(sources):
        raise ValueError(f"host holds {len(targets)} tensor(s), value {len(sources)}")
    for k, (dst, src) in enumerate(zip(targets, sources, strict=True)):
        if dst.shape != src.shape or dst.dtype != src.dtype:
            raise ValueError(f"host[{k}] is {tuple(dst.shape)} {dst.dtype}; the value is "
                             f"{tuple(src.shape)} {src.dtype}")
        if dst.device.type != "cpu":
            raise ValueError(f"host[{k}] is on {dst.device}; allocate it with "
                             "pinned_host_like")
    for dst, src in zip(targets, sources, strict=True):
        dst.copy_(src, non_blocking=src.device.type == "cuda")
    devices = {src.device for src in sources if src.device.type == "cuda"}
    for device in devices:
        torch.cuda.current_stream(device).synchronize()
    return host
