"""`TorchRobotHandle.capture`: a recorded call replayed with little launch overhead.

On a CUDA artifact the call is captured into a CUDA graph after a mandatory off-graph
warm-up (one-time per-device setup may not run during capture); on a CPU artifact the
"graph" is the recorded launch itself, with the same rules. Either way a graph bakes
buffer addresses and the model it was captured on, so every replay takes a replay
admission on the concrete context it was captured on and is refused (RuntimeError) after
a model mutation (capture again) or after that context was closed. Replays of one graph
are serialised. `static_out` is overwritten by every replay: clone it to keep a value.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from grid_rbd.torch import _host, _ops


class GraphCallable:
    """A captured call of one method on fixed-shape inputs.

    static_in: the captured input tensors (the given inputs, in the method's order; an
        omitted optional input is not among them); write new values into them, or pass
        them to `__call__`.
    static_out: the output tensor every replay overwrites.
    """

    def __init__(self, handle: Any, method: str, inputs: list[torch.Tensor | None],
                 gravity: float) -> None:
        self._handle = handle  # keeps the context's owner alive while the graph lives
        self.method = method
        self._inputs = [None if t is None else t.clone() for t in inputs]
        self.static_in = tuple(t for t in self._inputs if t is not None)
        self._gravity = float(gravity)
        artifact = handle.numpy._artifact
        # The concrete context: a graph on the default context belongs to its current
        # incarnation, so a re-created default refuses it as closed.
        self._ctx_id = handle.ctx_id or int(artifact.default_context())
        self.captured_version = int(artifact.model_version(self._ctx_id))
        self.static_out = _ops._empty_output(handle, method, self._inputs)
        self._graph: torch.cuda.CUDAGraph | None = None
        self._lock = threading.Lock()
        device = self.static_out.device
        if device.type == "cuda":
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                self._launch()  # the warm-up
            torch.cuda.current_stream(device).wait_stream(side)
            side.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._launch()
            self._graph = graph
        else:
            self._launch()  # the warm-up: the same checks a replay makes

    def _launch(self) -> None:
        _ops.launch(self._handle, self.method, self._inputs, self.static_out, self._gravity,
                    ctx_id=self._ctx_id, captured_version=self.captured_version)

    @property
    def ctx_id(self) -> int:
        """The concrete context the graph was captured on."""
        return self._ctx_id

    def replay(self) -> torch.Tensor:
        """Run the captured call on the current contents of `static_in`; returns
        `static_out` (overwritten by the next replay)."""
        with self._lock:
            if self._graph is None:
                self._launch()  # admission, version check and launch in one runtime call
            else:
                self._handle.numpy._artifact.replay(self._ctx_id, self.captured_version,
                                                    self._graph.replay)
        return self.static_out

    def __call__(self, *inputs: torch.Tensor) -> torch.Tensor:
        """Copy `inputs` into `static_in` (same shapes), then replay."""
        if len(inputs) != len(self.static_in):
            raise TypeError(f"this graph of {self.method} takes {len(self.static_in)} inputs, "
                            f"got {len(inputs)}")
        for k, (dst, src) in enumerate(zip(self.static_in, inputs, strict=True)):
            if tuple(src.shape) != tuple(dst.shape):
                raise ValueError(f"input {k} has shape {tuple(src.shape)}; the graph was "
                                 f"captured with {tuple(dst.shape)}")
            dst.copy_(src)
        return self.replay()

    def replay_into(self, host: Any) -> Any:
        """Replay, then copy `static_out` into `host` (from `pinned_host_like`)."""
        return _host.copy_to_host(host, self.replay())

    def __repr__(self) -> str:
        kind = "cuda graph" if self._graph is not None else "recorded launch"
        return (f"<GraphCallable {self.method} ({kind}) ctx_id={self._ctx_id:#x} "
                f"version={self.captured_version}>")
