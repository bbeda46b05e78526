"""The world-frame second-order sweep the generator traces (`symbolic.idsva`), evaluated
on plain floats, against the float64 reference's `idsva_so` (itself checked against
Pinocchio's ComputeRNEASecondOrderDerivatives and finite differences): fixed bases, free
flyers, trees with prismatic joints and a forest with a placed free flyer, with and
without external forces; and the emission order it hands the emitter."""

from __future__ import annotations

import numpy as np
import pytest
from support import ROBOTS, random_states, robot_available
from test_second_order_kernels import FLOATING_TREE

import grid_rbd.reference as reference
from grid_codegen import parse_urdf
from grid_codegen.symbolic import algorithms as A
from grid_codegen.symbolic import idsva

CASES = [("iiwa14", False), ("iiwa14", True), ("hyq", False), ("go2", True)]


def _blocks(model, s, b: int, with_fext: bool, order=None) -> np.ndarray:
    inertias = [[float(x) for x in body.inertia.dynamic_parameters()] for body in model.bodies]
    X = A.joint_transforms(model, [float(x) for x in s.q[b]])
    out = idsva.idsva_blocks(model, X, inertias, [float(x) for x in s.qd[b]],
                             [float(x) for x in s.qdd[b]],
                             [float(x) for x in s.f_ext[b]] if with_fext else None,
                             -9.81, order)
    return np.array([float(x) for x in out]).reshape(4, model.nv, model.nv, model.nv)


def _check(ref, s, with_fext: bool) -> None:
    model = ref.model
    assert idsva.supported(model)
    theirs = ref.idsva_so(s.q, s.qd, s.qdd, s.f_ext if with_fext else None)
    for b in range(len(s.q)):
        ours = _blocks(model, s, b, with_fext)
        for k in range(4):
            want = np.asarray(theirs[k])[b]
            scale = max(1.0, float(np.abs(want).max()))
            np.testing.assert_allclose(ours[k], want, rtol=0, atol=1e-11 * scale,
                                       err_msg=f"block {k}, state {b}")


@pytest.mark.parametrize("with_fext", [False, True], ids=["no_fext", "fext"])
@pytest.mark.parametrize("robot,floating", CASES, ids=[f"{r}-{'ff' if f else 'fixed'}"
                                                        for r, f in CASES])
def test_idsva_blocks_match_the_reference(robot, floating, with_fext):
    if not robot_available(robot):
        pytest.skip(f"{robot}'s URDF is not on this machine (example-robot-data)")
    ref = reference.load(ROBOTS[robot].path, floating_base=floating)
    _check(ref, random_states(ref.model, 3, seed=17 + len(robot)), with_fext)


@pytest.mark.parametrize("with_fext", [False, True], ids=["no_fext", "fext"])
def test_idsva_blocks_on_a_tree_with_a_prismatic_joint(tmp_path, with_fext):
    path = tmp_path / "so_tree.urdf"
    path.write_text(FLOATING_TREE)
    ref = reference.load(path, floating_base=True)
    _check(ref, random_states(ref.model, 3, seed=29), with_fext)


FOREST = """<robot name="forest">
  <link name="base"><inertial><mass value="2.0"/><origin xyz="0 0 0.1"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <link name="a"><inertial><mass value="1.0"/><origin xyz="0.1 0 0"/>
    <inertia ixx="0.01" ixy="0.001" ixz="0" iyy="0.02" iyz="0" izz="0.015"/></inertial></link>
  <link name="b"><inertial><mass value="0.5"/><origin xyz="0 0.1 0"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial></link>
  <link name="c"><inertial><mass value="0.3"/><origin xyz="0 0 0.05"/>
    <inertia ixx="0.004" ixy="0" ixz="0" iyy="0.003" iyz="0" izz="0.002"/></inertial></link>
  <joint name="ja" type="floating"><parent link="base"/><child link="a"/>
    <origin xyz="0.2 0 0.3" rpy="0.1 0.2 0.3"/></joint>
  <joint name="jb" type="continuous"><parent link="a"/><child link="b"/>
    <origin xyz="0.1 0 0"/><axis xyz="0 1 0"/></joint>
  <joint name="jc" type="revolute"><parent link="base"/><child link="c"/>
    <origin xyz="-0.1 0 0"/><axis xyz="1 0 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
</robot>
"""


def test_idsva_blocks_on_a_forest_with_a_placed_free_flyer(tmp_path):
    """Two roots (the fixed base is the world): a URDF floating joint with an origin
    offset and rotation over a continuous joint, beside a revolute one."""
    path = tmp_path / "forest.urdf"
    path.write_text(FOREST)
    ref = reference.load(path)
    assert sum(j.parent < 0 for j in ref.model.joints) == 2
    _check(ref, random_states(ref.model, 3, seed=31), True)


def test_the_emission_order_covers_every_entry_once():
    model = parse_urdf(ROBOTS["iiwa14"].path, floating_base=True)
    s = random_states(model, 1, seed=3)
    order: list[int] = []
    _blocks(model, s, 0, True, order)
    assert sorted(order) == list(range(4 * model.nv ** 3))


def test_models_outside_the_sweep_are_declined():
    planar = """<robot name="p"><link name="a"/><link name="b"><inertial><mass value="1"/>
      <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
      <joint name="j" type="planar"><parent link="a"/><child link="b"/>
      <axis xyz="0 0 1"/></joint></robot>"""
    model = parse_urdf(planar.encode())
    assert not idsva.supported(model)
    assert idsva.supported(parse_urdf(ROBOTS["iiwa14"].path))


GATHER_CASES = [("iiwa14", False), ("hyq", False), ("go2", True), ("g1", True)]


@pytest.mark.parametrize("robot,floating", GATHER_CASES,
                         ids=[f"{r}-{'ff' if f else 'fixed'}" for r, f in GATHER_CASES])
def test_the_gather_tables_match_the_reference(robot, floating):
    """The gather form (`symbolic.idsva_gather`: composites, the turns' vectors, every
    entry from its descriptor) against the float64 reference, with external forces; the
    structural zeros of its table are zeros of the reference at a random state; the
    entries two turns write agree to round-off (so either turn may write them)."""
    from grid_codegen.symbolic import idsva_gather as G
    if not robot_available(robot):
        pytest.skip(f"{robot}'s URDF is not on this machine (example-robot-data)")
    ref = reference.load(ROBOTS[robot].path, floating_base=floating)
    model = ref.model
    s = random_states(model, 2, seed=41)
    plan = G.plan(model)
    inertias = [[float(x) for x in body.inertia.dynamic_parameters()] for body in model.bodies]
    want = ref.idsva_so(s.q, s.qd, s.qdd, s.f_ext)
    for b in range(2):
        X = A.joint_transforms(model, [float(x) for x in s.q[b]])
        K = idsva.forward_table(model, X, inertias, [float(x) for x in s.qd[b]],
                                [float(x) for x in s.qdd[b]],
                                [float(x) for x in s.f_ext[b]], -9.81)
        ours = np.array(G.gather_values(model, K, plan), float)
        theirs = np.concatenate([np.asarray(w)[b].ravel() for w in want])
        scale = max(1.0, float(np.abs(theirs).max()))
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-11 * scale,
                                   err_msg=f"state {b}")
        zeros = np.array(plan.entries) == 0
        assert zeros.any() or robot == "iiwa14"
        assert np.all(theirs[zeros] == 0.0) or np.abs(theirs[zeros]).max() < 1e-12 * scale
    assert len(plan.turns) == sum(len(idsva._ancestor_dofs(model, b)) * j.nv
                                  for b, j in enumerate(model.joints))


def test_the_gather_descriptors_name_real_turns_and_columns():
    """Every descriptor of a floating tree decodes to a turn of the plan, a column on the
    chain of that turn's outer column and one of the sixteen formulas."""
    from grid_codegen.symbolic import idsva_gather as G
    model = parse_urdf(FLOATING_TREE.encode(), floating_base=True)
    plan = G.plan(model)
    owner = G.body_of(model)
    for e in plan.entries:
        if e == 0:
            continue
        e -= 1
        t, kr, f = e >> 12, (e >> 4) & 255, e & 15
        ip, jq = plan.turns[t]
        assert kr in idsva._ancestor_dofs(model, owner[jq])
        assert jq in idsva._ancestor_dofs(model, owner[ip])
        assert 0 <= f < len(G.FORMULAS)


@pytest.mark.parametrize("robot", ["iiwa14", "floating-tree"])
def test_the_product_codes_give_the_gather_values(robot):
    """Every entry decoded from its two product codes as `grid::idsva_gather_entry`
    decodes them (offsets into the padded U and K of `emit.idsva_gather`, signs in two
    bits) equals the gather form's value, which the test above checks against the
    reference; the pads put fewer of a warp's loads in one bank."""
    from grid_codegen.emit import idsva_gather_layout as E
    from grid_codegen.symbolic import idsva_gather as G
    model = (parse_urdf(FLOATING_TREE.encode(), floating_base=True) if robot != "iiwa14"
             else reference.load(ROBOTS["iiwa14"].path).model)
    s = random_states(model, 1, seed=7)
    inertias = [[float(x) for x in body.inertia.dynamic_parameters()] for body in model.bodies]
    X = A.joint_transforms(model, [float(x) for x in s.q[0]])
    K = idsva.forward_table(model, X, inertias, [float(x) for x in s.qd[0]],
                            [float(x) for x in s.qdd[0]], [float(x) for x in s.f_ext[0]],
                            -9.81)
    plan = G.plan(model)
    want = np.array(G.gather_values(model, K, plan), float)
    columns = np.array(E.pad_columns(model, G.composites(model, K)), float)
    U = np.zeros(E.TURN_STRIDE * len(plan.turns))
    for t, (ip, jq) in enumerate(plan.turns):
        U[E.TURN_STRIDE * t:E.TURN_STRIDE * t + 48] = [
            float(x) for x in G.turn_vectors(model, G.composites(model, K), ip, jq)]

    def product(code: int) -> float:
        if code == 0:
            return 0.0
        u, c, sign = code >> 16, (code >> 2) & 0x3FFF, code & 3
        assert sign in (1, 3)
        value = float(U[u:u + 6] @ columns[c:c + 6])
        return -value if sign == 3 else value

    codes = E.entry_codes(plan)
    ours = np.array([product(c & 0xFFFFFFFF) + product(c >> 32) for c in codes])
    np.testing.assert_allclose(ours, want, rtol=0, atol=1e-12 * max(1.0, np.abs(want).max()))
    assert [c == 0 for c in codes] == [e == 0 for e in plan.entries]
    assert E.bank_wavefronts(model, plan) < E.bank_wavefronts(model, plan, 24, 48)
    # The memory form's tables (grid::idsva_gather_sparse) replayed: every non-zero code
    # at its entry, zeros elsewhere.
    sparse, slots, chunks = E.sparse_tables(plan)
    chunk = E.chunk_of(len(codes))
    assert len(chunks) == -(-len(codes) // chunk) + 1 and chunks[-1] == len(sparse)
    replayed = [0] * len(codes)
    for c in range(len(chunks) - 1):
        assert chunks[c] <= chunks[c + 1]
        for k in range(chunks[c], chunks[c + 1]):
            assert 0 <= slots[k] < chunk and replayed[chunk * c + slots[k]] == 0
            replayed[chunk * c + slots[k]] = sparse[k]
    assert replayed == codes


@pytest.mark.parametrize("robot", ["iiwa14", "floating-tree"])
def test_the_tile_form_writes_every_entry_once(robot):
    """The tile form's pairs and masks (`symbolic.idsva_gather.pair_masks`), replayed as
    `emit.idsva_gather`'s pair function writes them (every rule whose bit is set, the
    indices from (ip, jq, kr) and the rule's order): every written entry gets the value
    of its descriptor's formula, every nonzero descriptor is written, and no entry is
    written by two different (turn, column, formula)."""
    from grid_codegen.symbolic import idsva_gather as G
    model = (parse_urdf(FLOATING_TREE.encode(), floating_base=True) if robot != "iiwa14"
             else reference.load(ROBOTS["iiwa14"].path).model)
    nv = model.nv
    plan = G.plan(model)
    writers: dict[int, set] = {}
    for t, kr, mask in G.pair_masks(model, plan):
        ip, jq = plan.turns[t]
        index = {"i": ip, "j": jq, "k": kr}
        for r, (_, block, order, formula) in enumerate(G.RULES):
            if mask >> r & 1:
                a, c, d = (index[x] for x in order)
                entry = block * nv ** 3 + (a * nv + c) * nv + d
                writers.setdefault(entry, set()).add(G.descriptor(t, kr, formula))
    assert all(len(w) == 1 for w in writers.values())
    assert {e: w.pop() for e, w in writers.items()} == {
        e: code for e, code in enumerate(plan.entries) if code}


@pytest.mark.parametrize("robot", ["iiwa14", "floating-tree"])
def test_the_tile_layout_aligns_what_moves_in_vectors(robot):
    """The gather layout (`emit.idsva_gather_layout.Layout`): odd strides put a warp's scalar
    loads and stores of distinct columns and turns in distinct banks; the tile form's
    16-byte vector moves need every item and its tile at multiples of 4 scalars, and an
    item size of 4 times an odd number keeps the head's staging in distinct banks; the float64
    block of 8 items fits an H100/H200's 227 KB per block, so that float32 fits two per
    SM. Every region holds its data."""
    from grid_codegen.emit import idsva_gather_layout as E
    from grid_codegen.symbolic import idsva_gather as G
    model = (parse_urdf(FLOATING_TREE.encode(), floating_base=True) if robot != "iiwa14"
             else reference.load(ROBOTS["iiwa14"].path).model)
    nv, turns = model.nv, len(G.plan(model).turns)
    for fd in (False, True):
        lay = E.layout(model, fd)
        assert lay.k == E.COLUMN_STRIDE * nv + 52 * model.nb
        assert lay.head >= lay.k + (3 * nv * nv if fd else 0)
        work = E.TURN_STRIDE * turns + (4 * nv ** 3 if lay.tile else 0)
        assert lay.size >= lay.head + max(work, 4 * nv * nv if fd else 0)
        assert E.COLUMN_STRIDE % 2 == 1 and E.TURN_STRIDE % 2 == 1
        if not lay.tile:
            continue
        assert lay.size % 4 == 0 and (lay.size // 4) % 2 == 1
        assert (lay.head + E.TURN_STRIDE * turns) % 4 == 0
        assert 8 * lay.size * 8 <= 227 * 1024 - 1024
        assert 2 * (4 * lay.size * 8 + 1024) <= 228 * 1024
    assert [E.layout(model, fd).tile for fd in (False, True)] == [robot == "iiwa14"] * 2


@pytest.mark.parametrize("robot", ["iiwa14", "floating_tree"])
def test_only_final_entries_stream(robot):
    """The gather steps store what no later step reads with `store_once` (streaming:
    evict-first, measured 4-6% faster for idsva_so), but fdsva_so's memory form reads its
    blocks back from the output (step 5), which streamed stores sent to DRAM (go2: 36%
    slower): its entries are plain stores; the tile form streams only the tile's copy out,
    after step 5."""
    from grid_codegen.emit import idsva_gather
    from grid_codegen.emit import idsva_gather_layout as E
    from grid_codegen.emit.writer import Writer
    from grid_codegen.symbolic import idsva_gather as G
    model = (parse_urdf(FLOATING_TREE.encode(), floating_base=True) if robot != "iiwa14"
             else reference.load(ROBOTS["iiwa14"].path).model)
    plan = G.plan(model)
    turns, nv = len(plan.turns), model.nv
    for fd in (False, True):
        lay = E.layout(model, fd, turns)
        pairs = len(G.pair_masks(model, plan)) if lay.tile else 0
        w = Writer()
        idsva_gather._emit_steps(w, "x", model, lay, turns, 4 * nv ** 3, fd, pairs)
        text = w.text()
        if lay.tile:
            assert "idsva_copy(out, tile" in text and "idsva_gather_sparse" not in text
            assert text.index("idsva_copy(out, tile") > text.rindex("sync();")
        else:
            assert f"idsva_gather_sparse<T, {'false' if fd else 'true'}, " in text
