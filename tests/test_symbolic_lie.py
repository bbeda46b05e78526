"""The free flyer's chart Jacobians as the generator traces them (`symbolic.lie`) against
the float64 reference's (`configuration.integrate_jacobians`, itself checked against
Pinocchio), on both sides of the switch from Taylor series to closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from support import ROBOTS

from grid_codegen import parse_urdf
from grid_codegen.symbolic import lie
from grid_rbd.reference import configuration


@pytest.mark.parametrize("angle", [0.0, 1e-7, 1e-3, 0.3, lie.SERIES_BELOW - 1e-9,
                                   lie.SERIES_BELOW, 0.51, 1.0, 3.0])
def test_integrate_jacobians_match_the_reference(angle):
    model = parse_urdf(ROBOTS["iiwa14"].path, floating_base=True)
    rng = np.random.default_rng(int(angle * 1e3) + 1)
    for _ in range(4):
        xi = rng.normal(size=6)
        w = xi[3:]
        xi[3:] = w * (angle / np.linalg.norm(w))
        q = np.zeros(model.nq)
        q[6] = 1.0  # identity quaternion (the Jacobians depend on the step only)
        dq = np.zeros(model.nv)
        dq[:6] = xi
        d_q, d_v = configuration.integrate_jacobians(model, q, dq)
        J0, J1 = lie.integrate_jacobians(list(xi))
        np.testing.assert_allclose(np.array(J0, float), d_q[0, :6, :6], rtol=0, atol=1e-12)
        np.testing.assert_allclose(np.array(J1, float), d_v[0, :6, :6], rtol=0, atol=1e-12)
