"""The tree factorisation the level strategies emit (`grid_codegen.emit.tree_ldlt`), checked
on the math: its ancestor pattern holds every non-zero of M, the factorisation in that
pattern (the emitted steps, replayed in numpy) reproduces M with no fill-in, and the
per-lane solve gives `M^-1 b`. Robots with a fixed base, a free flyer and branches."""

from __future__ import annotations

import numpy as np
import pytest
from artifact_harness import load_model
from support import ROBOTS, random_states

from grid_codegen.emit.tree_ldlt import _nth_index, dof_ancestors, index_runs
from grid_rbd.reference import ReferenceRobot

TREE_ROBOTS = sorted(ROBOTS)  # every robot of the test set


def _factor(M: np.ndarray, ancestors: list[tuple[int, ...]]) -> np.ndarray:
    """`emit_tree_ldlt`'s steps on the lower triangle of a copy of M."""
    H = np.tril(M).copy()
    for k in range(len(M) - 1, 0, -1):
        chain = ancestors[k]
        for i in chain:
            l = H[k, i] / H[k, k]
            for j in chain:
                if j <= i:
                    H[i, j] -= l * H[k, j]
    return H


def _solve(H: np.ndarray, ancestors: list[tuple[int, ...]], b: np.ndarray) -> np.ndarray:
    """`emit_tree_ldlt_solve`'s statements: `L^T D` upwards, then `L` downwards."""
    v = b.copy()
    dinv = 1.0 / np.diag(H)
    for k in range(len(v) - 1, -1, -1):
        v[k] *= dinv[k]
        for i in ancestors[k]:
            v[i] -= H[k, i] * v[k]
    for k in range(len(v)):
        if ancestors[k]:
            v[k] -= dinv[k] * sum(H[k, i] * v[i] for i in ancestors[k])
    return v


@pytest.mark.parametrize("robot", TREE_ROBOTS)
def test_factorisation_along_the_tree(robot):
    model = load_model(robot)
    ref = ReferenceRobot(model)
    ancestors = dof_ancestors(model)
    nv = model.nv
    related = np.eye(nv, dtype=bool)
    for k, chain in enumerate(ancestors):
        assert all(i < k for i in chain), "ancestors come first"
        related[k, list(chain)] = related[list(chain), k] = True
    rng = np.random.default_rng(3)
    for q in random_states(model, 3, seed=4).q:
        M = ref.crba(q[None])[0]
        assert not M[~related].any(), "M is non-zero only between a dof and its ancestors"
        H = _factor(M, ancestors)
        assert not H[~related & np.tri(nv, dtype=bool)].any(), "no fill-in"
        D = np.diag(H)
        L = np.tril(H, -1) / D[:, None] + np.eye(nv)
        np.testing.assert_allclose(L.T @ np.diag(D) @ L, M, rtol=0, atol=1e-12 * abs(M).max())
        b = rng.standard_normal(nv)
        x = _solve(H, ancestors, b)
        np.testing.assert_allclose(M @ x, b, rtol=0, atol=1e-9 * abs(b).max())


def _evaluate(expr: str, a: int) -> int:
    """The C++ index expression of `_nth_index` at `a`: `(a < N ? a + s : <expr>)`
    nested in the else branch, down to `a`, `a + s` or `a - s`."""
    if expr.startswith("("):
        condition, rest = expr[1:-1].split(" ? ", 1)
        yes, no = rest.split(" : ", 1)
        return _evaluate(yes if a < int(condition.split(" < ")[1]) else no, a)
    parts = expr.split()
    return a if len(parts) == 1 else a + int(parts[2]) * (1 if parts[1] == "+" else -1)


@pytest.mark.parametrize("indices", [(0, 1, 2), (0, 1, 2, 3, 4, 5, 9, 10), (2, 5, 6, 9),
                                     (0, 3, 4, 7, 8, 11, 12, 13)])
def test_lane_to_ancestor_index(indices):
    runs = index_runs(indices)
    assert sum(stop - start for start, stop in runs) == len(indices)
    expr = _nth_index(runs, "a")
    assert [_evaluate(expr, a) for a in range(len(indices))] == list(indices)
