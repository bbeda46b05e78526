"""The one method table of the robot handles (numpy, JAX and torch share it).

Each public method is an algorithm of the registry (`grid_codegen.registry`, where its
ports, shapes, aliases and differentiable inputs are written once); this module adds
what a handle needs on top: signatures, docstrings and the check of an artifact's
descriptor against the table.

`out=` (all methods): a C-contiguous array of the handle dtype holding `B * prod(output)`
scalars, shaped either `(B, *output)` or flat `(B, prod(output))`; the result is a view
of it shaped `(B, *output)` (e.g. a gradient's `(B, nv, 2*nv)` viewed from a
`(B, 2*nv*nv)` buffer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from grid_codegen.registry import ALGORITHMS, Algorithm, Dim, Dims
from grid_codegen.registry import Port as Input

__all__ = ["ALIASES", "BY_NAME", "METHODS", "Dim", "Dims", "Input", "Method", "resolve",
           "check_against_artifact"]


@dataclass(frozen=True)
class Method(Algorithm):
    """One handle method: a registry algorithm (name, ports, output shape, aliases, the
    inputs a JAX/torch backward reaches through `gradient`) plus what a handle adds on top
    (the shapes `out=` may take, the signature and docstring the methods are built with)."""

    def out_shapes(self, batch: int, dims: Dims) -> tuple[tuple[int, ...], ...]:
        """The shapes `out=` may have: `(B, *output)` or flat `(B, prod(output))`."""
        shaped = (batch, *self.output_shape(dims))
        flat = (batch, self.output_size(dims))
        return (shaped,) if shaped == flat else (shaped, flat)

    def signature_text(self) -> str:
        args = [p.name if p.required else f"{p.name}=None" for p in self.inputs]
        kw = (["gravity=-9.81"] if self.uses_gravity else []) + ["out=None"]
        return f"{self.name}({', '.join(args)}, *, {', '.join(kw)})"

    def docstring(self) -> str:
        shape = ", ".join(["B", *(str(d) for d in self.output)])
        lines = [self.doc, "", "Inputs (C-contiguous, the handle dtype, batch on axis 0):"]
        lines += [f"    {p.name}: (B, {p.width}){'' if p.required else ', optional'}"
                  f"{' -- ' + p.doc if p.doc else ''}" for p in self.inputs]
        if self.uses_gravity:
            lines.append("    gravity: signed gravitational acceleration along z "
                         "(default -9.81).")
        lines.append(f"    out: optional buffer, ({shape}) or flat; the result is a view of "
                     "it.")
        if self.parts:
            returned = ", ".join(f"{name} ({', '.join(['B', *(str(d) for d in dims)])})"
                                 for name, dims in self.parts)
            lines.append(f"Returns: the tuple ({returned}), views of one ({shape}) result.")
        else:
            lines.append(f"Returns: ({shape}).")
        if self.aliases:
            lines.append(f"Aliases: {', '.join(self.aliases)}.")
        return "\n".join(lines)


def _method(a: Algorithm) -> Method:
    return Method(**{f.name: getattr(a, f.name) for f in fields(a)})


# One method per algorithm of the registry (grid_codegen.registry), in the same order.
METHODS: tuple[Method, ...] = tuple(_method(a) for a in ALGORITHMS)

BY_NAME: dict[str, Method] = {m.name: m for m in METHODS}
ALIASES: dict[str, str] = {alias: m.name for m in METHODS for alias in m.aliases}


def resolve(name: str) -> Method:
    """The method called `name` or aliased so."""
    method = BY_NAME.get(ALIASES.get(name, name))
    if method is None:
        known = sorted([*BY_NAME, *ALIASES])
        raise KeyError(f"no method {name!r}; the handles have {', '.join(known)}")
    return method


def check_against_artifact(algorithms: dict[str, dict], dims: Dims) -> None:
    """Raise when the artifact's descriptor disagrees with this table (an artifact from
    another generator version): every built algorithm must be in the table with the same
    input names, widths, required flags and output size."""
    for name, info in algorithms.items():
        method = BY_NAME.get(name)
        if method is None:
            raise RuntimeError(f"the artifact builds {name!r}, which this grid_rbd does not "
                               "know; update grid_rbd or rebuild the artifact")
        expected = [(p.name, p.width(dims), p.required) for p in method.inputs]
        actual = [(str(n), int(w), bool(r)) for n, w, r in info["inputs"]]
        if expected != actual:
            raise RuntimeError(f"the artifact's {name} takes {actual}; this grid_rbd expects "
                               f"{expected}; rebuild the artifact (force_rebuild=True)")
        size = math.prod(int(n) for n in info["output_shape"])
        if size != method.output_size(dims):
            raise RuntimeError(f"the artifact's {name} returns {info['output_shape']} per "
                               f"item; this grid_rbd expects {method.output_shape(dims)}")
