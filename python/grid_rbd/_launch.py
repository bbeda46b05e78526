"""Per-context launch overrides of the numpy handle: threads per block and the strategy
variant per algorithm (`set_threads_for`, `set_variant_for`, ...). They change how a
kernel is launched on this context, never what it computes, so the model version does
not move."""

from __future__ import annotations

from typing import Any

import numpy as np

from grid_rbd._methods import resolve


class LaunchOverrides:
    """The launch-override methods of the numpy handle (a mixin over `RobotHandle`:
    `_artifact`, `_ctx_id`, `_check_open`, `_algorithms`)."""

    def set_threads_for(self, algorithm: str, threads: int) -> None:
        """Launch `algorithm` (a method name or alias) with `threads` threads per block on
        this context (0: the compiled choice). Ordered like a mutation (after every
        admitted call), invisible to other contexts, and the model version does not
        move. A multiple of 32 in [32, 1024]; the CPU backend accepts and ignores it."""
        self._check_open()
        self._artifact.set_threads_for(self._ctx_id, self._algorithm_name(algorithm),
                                       _threads(threads))

    def set_threads_per_block(self, threads: int) -> None:
        """`set_threads_for` every algorithm of the artifact."""
        self._check_open()
        self._artifact.set_threads_for(self._ctx_id, "", _threads(threads))

    def set_variant_for(self, algorithm: str, variant: str) -> None:
        """Launch `algorithm` with the strategy variant `variant` on this context ("": the
        compiled choice); `variants(algorithm)` lists them."""
        self._check_open()
        if not isinstance(variant, str):
            raise TypeError(f"variant must be a str, got {type(variant).__name__}")
        self._artifact.set_variant_for(self._ctx_id, self._algorithm_name(algorithm), variant)

    def variants(self, algorithm: str) -> tuple[str, ...]:
        """The strategy variants `algorithm` can be launched with."""
        return tuple(self._artifact.variants(self._algorithm_name(algorithm)))

    def clear_launch_overrides(self) -> None:
        """Every algorithm back to its compiled launch settings."""
        self._check_open()
        self._artifact.clear_launch_overrides(self._ctx_id)

    @property
    def launch_overrides(self) -> dict[str, dict[str, Any]]:
        """Per algorithm {"threads_per_block": int, "variant": str} (0 / "": compiled)."""
        self._check_open()
        return dict(self._artifact.launch_overrides(self._ctx_id))

    def _algorithm_name(self, algorithm: str) -> str:
        try:
            name = resolve(algorithm).name
        except KeyError as exc:
            raise ValueError(exc.args[0]) from None
        if name not in self._algorithms:
            raise ValueError(f"{name} was not built into this artifact (built: "
                             f"{', '.join(self._algorithms)})")
        return name


def _threads(threads: Any) -> int:
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
        raise TypeError(f"threads must be an int, got {type(threads).__name__}")
    return int(threads)
