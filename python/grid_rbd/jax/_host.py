"""`to_host`: jax arrays (any pytree of them) to numpy.

Large arrays go through XLA's `pinned_host` memory kind: a device_put to the same
sharding in page-locked host memory runs at the PCIe rate, and the numpy array is a view
of that buffer. The route costs a little per array (tens of microseconds), so by default
only arrays of at least `PINNED_THRESHOLD_BYTES` take it; smaller ones go through
`jax.device_get`, as does every array on a device without that memory kind.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

#: Arrays at least this large take the pinned route under pinned="auto".
PINNED_THRESHOLD_BYTES = 256 * 1024
PINNED_HOST = "pinned_host"


def has_pinned_host(array: jax.Array) -> bool:
    """Whether every device of `array` offers the pinned_host memory kind."""
    try:
        return all(any(m.kind == PINNED_HOST for m in d.addressable_memories())
                   for d in array.sharding.device_set)
    except (AttributeError, NotImplementedError, RuntimeError):
        return False


def _wants_pinned(array: jax.Array, pinned: bool | str) -> bool:
    if pinned == "auto":
        return array.nbytes >= PINNED_THRESHOLD_BYTES
    return bool(pinned)


def to_host(tree: Any, pinned: bool | str = "auto") -> Any:
    """`tree` (a jax array or any pytree of them) with every jax array as a numpy array.

    pinned: "auto" (default) sends arrays of at least 256 KiB through the pinned_host
    memory kind and smaller ones through `jax.device_get`; True / False force one route
    for every array. Where the device has no pinned_host memory, `jax.device_get` is used
    whatever `pinned` says. Leaves that are not jax arrays (numpy arrays, scalars) are
    returned as they are. Call it outside `jax.jit`: it needs concrete arrays.
    """
    if pinned not in ("auto", True, False):
        raise ValueError(f"pinned must be 'auto', True or False, got {pinned!r}")
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    for leaf in leaves:
        if isinstance(leaf, jax.core.Tracer):
            raise TypeError("to_host needs concrete arrays; call it outside jax.jit "
                            "(or return the arrays from the jitted function first)")
    routes = [isinstance(leaf, jax.Array) and _wants_pinned(leaf, pinned)
              and has_pinned_host(leaf) for leaf in leaves]
    # Start every pinned transfer before waiting on any of them.
    staged = [jax.device_put(leaf, leaf.sharding.with_memory_kind(PINNED_HOST)) if pin
              else None for leaf, pin in zip(leaves, routes, strict=True)]
    plain = jax.device_get([leaf if isinstance(leaf, jax.Array) and not pin else None
                            for leaf, pin in zip(leaves, routes, strict=True)])
    out = []
    for leaf, host, fetched in zip(leaves, staged, plain, strict=True):
        if host is not None:
            out.append(np.asarray(host))
        elif isinstance(leaf, jax.Array):
            out.append(fetched)
        else:
            out.append(leaf)
    return jax.tree_util.tree_unflatten(treedef, out)
