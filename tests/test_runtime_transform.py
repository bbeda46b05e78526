"""The runtime joint-origin table (`runtime_transform=True`) on the generated CPU build:
with the table set to the origins of an edited URDF, every kernel (dynamics, their
gradients, end-effector poses and their gradient, `fk_batched`, `world_kinematics`,
`frame_jacobian_indexed`, the centre of mass) matches the float64 reference rebuilt
from that URDF, in every strategy the build has; the default table reproduces the URDF;
option keys and refusals.

The table (grid_codegen.transforms): (nb, 7) `[x, y, z, qx, qy, qz, qw]` per joint, the
parent body -> joint frame placement."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from artifact_harness import Artifact, _build
from support import REPO, random_states, scaled_error

from grid_codegen import transforms
from grid_codegen.generate import generate
from grid_codegen.options import CodegenOptions
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import frames as F
from grid_codegen.urdf import parse_urdf
from grid_rbd import interop
from grid_rbd.reference import ReferenceRobot

IIWA = REPO / "robots/iiwa14/iiwa14.urdf"
DYNAMICS = ("inverse_dynamics", "forward_dynamics", "inverse_dynamics_gradient",
            "forward_dynamics_gradient")
KINEMATICS = ("end_effector_pose", "end_effector_pose_gradient", "fk_batched",
              "world_kinematics", "frame_jacobian_indexed", "com")
MORE = ("crba", "minv", "end_effector_pose_hessian")
EDITS = {  # joint -> (xyz, rpy) of its new <origin>
    "iiwa_joint_1": ("0.02 -0.01 0.17", "0.1 -0.05 0.2"),
    "iiwa_joint_2": ("0.01 0.0 0.21", "1.4 0.1 3.0"),
    "iiwa_joint_3": ("0 0.19 0.03", "1.6 -0.2 3.1"),
    "iiwa_joint_4": ("-0.02 0.01 0.23", "1.5 0.05 -0.1"),
    "iiwa_joint_5": ("0 0.17 -0.01", "-1.5 3.0 0.2"),
    "iiwa_joint_6": ("0.03 0 0.2", "1.7 0 0.3"),
    "iiwa_joint_7": ("0 0.09 0.01", "-1.6 3.1 -0.2"),
}


def edited_urdf(edits: dict[str, tuple[str, str]] = EDITS) -> str:
    """iiwa14's URDF with the `<origin>` of the named joints replaced."""
    text = IIWA.read_text()
    for joint, (xyz, rpy) in edits.items():
        pattern = rf'(<joint name="{joint}"[^>]*>.*?)<origin[^>]*/>'
        text, n = re.subn(pattern, rf'\g<1><origin xyz="{xyz}" rpy="{rpy}"/>', text,
                          count=1, flags=re.S)
        assert n == 1, joint
    return text


def model_of(text: str | None = None, floating_base: bool = False):
    return parse_urdf((text or IIWA.read_text()).encode(), floating_base=floating_base)


def origin_table(model) -> np.ndarray:
    """The (nb, 7) table of `model`'s joint origins (what set_transform_params takes)."""
    return np.asarray(transforms.default_table(model)).reshape(-1, 7)


def _expected(ref: ReferenceRobot, model, name: str, s) -> tuple[tuple, np.ndarray]:
    """`(inputs, result)` per item, flattened as the kernel writes it."""
    B = len(s.q)
    if name == "inverse_dynamics":
        return (s.q, s.qd, s.qdd, None), ref.inverse_dynamics(s.q, s.qd, s.qdd)
    if name == "forward_dynamics":
        return (s.q, s.qd, s.u, None), ref.forward_dynamics(s.q, s.qd, s.u)
    if name == "inverse_dynamics_gradient":
        return (s.q, s.qd, s.qdd, None), ref.inverse_dynamics_gradient(s.q, s.qd, s.qdd)
    if name == "forward_dynamics_gradient":
        return (s.q, s.qd, s.u, None), ref.forward_dynamics_gradient(s.q, s.qd, s.u)
    if name in ("end_effector_pose", "end_effector_pose_gradient", "crba", "minv",
                "end_effector_pose_hessian"):
        return (s.q,), getattr(ref, name)(s.q)
    if name == "com":
        c, J = ref.com(s.q)
        return (s.q,), np.concatenate([c.reshape(B, -1), J.reshape(B, -1)], axis=1)
    if name == "world_kinematics":
        # The baked algorithm of the edited model on floats (its R, p are checked against
        # the reference's forward kinematics in _check_world_kinematics).
        rows = [F.world_kinematics(model, A.joint_transforms(model, list(q)), list(qd))
                for q, qd in zip(s.q, s.qd, strict=True)]
        return (s.q, s.qd), np.asarray(rows, dtype=np.float64)
    if name == "frame_jacobian_indexed":  # the last body's frame, the codes in turn
        codes = np.arange(B) % 3
        rf = ("WORLD", "LOCAL", "LOCAL_WORLD_ALIGNED")
        want = np.concatenate([ref.frame_jacobian(s.q[b:b + 1], model.nb - 1, rf[codes[b]])
                               for b in range(B)])
        selector = np.stack([np.full(B, model.nb - 1.0), codes.astype(np.float64)], 1)
        return (s.q, selector), want
    raise KeyError(name)


def _check_fk(out: np.ndarray, ref: ReferenceRobot, q: np.ndarray, tol: float, what: str):
    R, p = interop.frame_placement(ref, q, ref.ee_frames[0].name)
    assert np.abs(out[:, :3] - p).max() <= tol * (1 + np.abs(p).max()), what
    w, x, y, z = np.moveaxis(out[:, 3:], -1, 0)
    Rq = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                   2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                   2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
                  axis=-1).reshape(-1, 3, 3)
    assert np.abs(Rq - R).max() <= 4 * tol, what


def _check_world_kinematics(out: np.ndarray, ref: ReferenceRobot, q: np.ndarray,
                            tol: float) -> None:
    nb = ref.nb
    T = ref.forward_kinematics(q)
    assert np.abs(out[:, :9 * nb].reshape(-1, nb, 3, 3) - T[:, :, :3, :3]).max() < tol
    assert np.abs(out[:, 9 * nb:12 * nb].reshape(-1, nb, 3) - T[:, :, :3, 3]).max() < tol


def check_all(art: Artifact, state, model, s, tol: float,
              names=DYNAMICS + KINEMATICS + MORE):
    """Every algorithm and variant of `art` on `state` against the reference of `model`."""
    ref = ReferenceRobot(model)
    for name in names:
        if name not in art.algorithms:
            continue
        for variant in art.algorithms[name].variants:
            if name == "fk_batched":
                _check_fk(np.asarray(state.call(name, s.q, variant=variant)), ref, s.q, tol,
                          f"fk_batched {variant}")
                continue
            inputs, want = _expected(ref, model, name, s)
            got = np.asarray(state.call(name, *inputs, variant=variant)).reshape(want.shape)
            assert scaled_error(got, want) < tol, (name, variant, scaled_error(got, want))
            if name == "world_kinematics":
                _check_world_kinematics(got, ref, s.q, tol)


def set_table(art: Artifact, state, table: np.ndarray) -> int:
    table = np.ascontiguousarray(table, dtype=np.float64)
    return art.desc.set_transform_table(state.handle, table.ctypes.data_as(ctypes.c_void_p))


def _artifact(model, algorithms, **options) -> Artifact:
    so, _ = _build(model, CodegenOptions(algorithms=algorithms, dtype="float64",
                                         runtime_transform=True, **options), "cpu")
    return Artifact(so)


# -- options, the table, refusals (no compiler) -------------------------------------------
def test_option_is_keyed_only_when_set():
    base = CodegenOptions().canonical_json()
    assert "runtime_transform" not in base
    assert CodegenOptions(runtime_transform=False).canonical_json() == base
    assert '"runtime_transform":true' in CodegenOptions(runtime_transform=True).canonical_json()


def test_default_table_is_the_urdf_and_traces_to_the_baked_transforms():
    model = model_of(floating_base=True)
    table = origin_table(model)
    assert table.shape == (model.nb, 7)
    np.testing.assert_allclose(np.linalg.norm(table[:, 3:], axis=1), 1.0, atol=1e-15)
    q = random_states(model, 1, seed=3).q[0]
    baked = A.joint_transforms(model, list(q))
    runtime = A.joint_transforms(model, list(q), transforms.origins(model, list(table.ravel())))
    for (Rb, pb), (Rr, pr) in zip(baked, runtime, strict=True):
        np.testing.assert_allclose(Rr, Rb, atol=1e-14)
        np.testing.assert_allclose(pr, pb, atol=1e-14)


def test_edited_table_traces_to_the_edited_models_transforms():
    """Every thread pass reads the joint transforms X (fk_batched the origin quaternions
    too): X from the table equals the edited URDF's, so the centroidal and second-order
    passes follow the table with the compiled ones checked below."""
    model, edited = model_of(floating_base=True), model_of(edited_urdf(), floating_base=True)
    table = list(origin_table(edited).ravel())
    for q in random_states(model, 3, seed=4).q:
        got = A.joint_transforms(model, list(q), transforms.origins(model, table))
        for (Rr, pr), (Re, pe) in zip(got, A.joint_transforms(edited, list(q)), strict=True):
            np.testing.assert_allclose(Rr, Re, atol=1e-14)
            np.testing.assert_allclose(pr, pe, atol=1e-14)
        quats = [transforms.origin_quaternion(table, i) for i in range(model.nb)]
        np.testing.assert_allclose(F.world_quaternions(model, list(q), quats),
                                   F.world_quaternions(edited, list(q)), atol=1e-14)


def test_unsupported_combinations_are_refused():
    model = model_of()
    with pytest.raises(ValueError, match="device API"):
        generate(model, CodegenOptions(algorithms=("inverse_dynamics",),
                                       runtime_transform=True), device_api=True)


def test_default_build_text_does_not_name_the_table():
    files = generate(model_of(), CodegenOptions(algorithms=("end_effector_pose",),
                                                strategy="thread"))
    assert "args.transform" not in files["grid.cuh"]
    assert "kTransformSize = 0" in files["wrapper.cu"]


# -- the generated CPU build ------------------------------------------------------------
@pytest.fixture(scope="module")
def fixed_art():
    return _artifact(model_of(), DYNAMICS + KINEMATICS + MORE)


def test_cpu_build_follows_the_table_on_a_fixed_base(fixed_art):
    art = fixed_art
    assert art.desc.runtime_transform == 1 and art.desc.transform_table_size == 7 * 7
    model, edited = model_of(), model_of(edited_urdf())
    state = art.state()
    s = random_states(model, 7, seed=11, max_velocity=3.0)
    check_all(art, state, model, s, 1e-9)  # the URDF's origins first
    assert set_table(art, state, origin_table(edited)) == 0
    check_all(art, state, edited, s, 1e-9)
    other = art.state()  # another state keeps the URDF's table
    check_all(art, other, model, s, 1e-9, names=("inverse_dynamics", "end_effector_pose"))
    assert set_table(art, state, origin_table(model)) == 0
    check_all(art, state, model, s, 1e-9, names=("end_effector_pose_gradient",))


def test_cpu_build_follows_the_table_on_a_floating_base():
    model = model_of(floating_base=True)
    edited = model_of(edited_urdf(), floating_base=True)
    table = origin_table(edited)
    # The free flyer's origin moves too (Pinocchio's jointPlacements[1]).
    table[0] = [0.1, -0.2, 0.3, 0.0, 0.0, np.sin(0.2), np.cos(0.2)]
    names = ("inverse_dynamics", "forward_dynamics_gradient", "end_effector_pose_gradient",
             "fk_batched", "frame_jacobian_indexed", "com")
    art = _artifact(model, names)
    state = art.state()
    s = random_states(model, 5, seed=12, max_velocity=3.0)
    assert set_table(art, state, table) == 0
    check_all(art, state, _with_root_origin(edited, table[0]), s, 1e-9, names)


def _with_root_origin(model, row):
    """`model` with its free flyer's placement set to the table row `row`."""
    import dataclasses

    from grid_codegen.model import Placement

    x, y, z, w = row[3:]
    R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                  [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                  [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    root = dataclasses.replace(model.joints[0], placement=Placement(R, np.asarray(row[:3])))
    return dataclasses.replace(model, joints=(root, *model.joints[1:]))


def test_baked_build_refuses_the_table():
    model = model_of()
    so, _ = _build(model, CodegenOptions(algorithms=("inverse_dynamics",), dtype="float64",
                                         strategy="thread"), "cpu")
    art = Artifact(so)
    assert art.desc.runtime_transform == 0 and art.desc.transform_table_size == 0
    assert set_table(art, art.state(), origin_table(model)) == 8  # GRID_ERROR_UNSUPPORTED


def test_ops_increase_is_reported():
    """Constant folding of the origins is lost: the traced operation counts grow (the
    figures the docs quote for iiwa14)."""
    model = model_of()
    counts = {}
    for flag in (False, True):
        files = generate(model, CodegenOptions(algorithms=DYNAMICS + KINEMATICS,
                                               strategy="thread", runtime_transform=flag))
        counts[flag] = dict(re.findall(r'\{"(\w+)", \d+, \d+, \{.*?\{"thread", \d+, \d+, '
                                       r'\d+, 0, \(int64_t\)[\w:<>()]+, (\d+)\}',
                                       files["wrapper.cu"]))
    assert counts[False].keys() == counts[True].keys() == set(DYNAMICS + KINEMATICS)
    for name in counts[False]:
        assert int(counts[True][name]) >= int(counts[False][name]), name


def test_regressor_warp_strategy_follows_the_table():
    """The inverse-dynamics regressor's warp strategy traces its terms from the table too
    (`emit.regressor_warp.build_terms`), like its thread strategy: both against the
    reference of the edited model, on a floating base."""
    model = model_of(floating_base=True)
    edited = model_of(edited_urdf(), floating_base=True)
    table = origin_table(edited)
    table[0] = [0.1, -0.2, 0.3, 0.0, 0.0, np.sin(0.2), np.cos(0.2)]
    name = "inverse_dynamics_regressor"
    art = _artifact(model, (name,))
    assert {"thread", "warp"} <= set(art.algorithms[name].variants)
    state = art.state()
    s = random_states(model, 5, seed=13, max_velocity=3.0)
    assert set_table(art, state, table) == 0
    want = ReferenceRobot(_with_root_origin(edited, table[0])).inverse_dynamics_regressor(
        s.q, s.qd, s.qdd)
    for variant in art.algorithms[name].variants:
        got = np.asarray(state.call(name, s.q, s.qd, s.qdd, variant=variant))
        assert scaled_error(got.reshape(want.shape), want) < 1e-9, variant
