"""Kinematics: joint transforms, world poses, end-effector poses and their gradient.

Shared passes (used by every dynamics emitter):
* `emit_joint_transforms`: `X_i = liMi(q)`, every body independent (one step).
* `emit_world_poses`: `oX_i = oX_parent(i) * X_i`, level by level.

Algorithms:
* `end_effector_pose`: `(6 * num_ees,)` per item, `[x, y, z, roll, pitch, yaw]` of each
  end-effector frame in the world, `R = Rz(yaw) Ry(pitch) Rx(roll)`.
* `end_effector_pose_gradient`: `(6 * num_ees, nv)` coordinate derivatives of those poses
  along the tangent (local frame for a free flyer). With `s = [s_lin; w]` a dof's world
  motion column, `d p = s_lin + w x p` and the rpy rates solve
  `w = E(rpy) d(rpy)`: `dr = (cy wx + sy wy) / cp`, `dp = cy wy - sy wx`, `dy = wz + sp dr`.
"""

from __future__ import annotations

from grid_codegen.emit.algorithm import AlgorithmSpec, EmitContext, Port, emit_load
from grid_codegen.emit.joints import (
    emit_joint_transform,
    emit_runtime_joint_transform,
    emit_subspace_column,
    is_identity,
    placement_literal,
)
from grid_codegen.emit.layout import Buffer, Layout
from grid_codegen.emit.tree_ldlt import index_runs
from grid_codegen.emit.writer import Writer, comment_text
from grid_codegen.model import Frame


def emit_joint_transforms(ctx: EmitContext, w: Writer, q: Buffer, X: Buffer) -> None:
    """`X_i = liMi(q_i)` for every body: parent -> body placement, compact form (the
    origins from the runtime transform table on a `runtime_transform` build)."""
    joints = ctx.model.joints

    def unit(w: Writer, i: int) -> None:
        joint = joints[i]
        w.comment(f"body {i}: joint '{comment_text(joint.name)}' ({joint.type.value})")
        if ctx.options.runtime_transform:
            emit_runtime_joint_transform(w, joint, lambda k: q[joint.idx_q + k],
                                         f"(args.transform + {7 * i})", X.at(i))
            return
        emit_joint_transform(w, joint, lambda k: q[joint.idx_q + k], X.at(i))

    ctx.strategy.schedule(w, [tuple(range(ctx.model.nb))], unit, "joint transforms")


def emit_world_poses(ctx: EmitContext, w: Writer, X: Buffer, oX: Buffer) -> None:
    """`oX_i = oX_parent * X_i`, root to leaves, one tree level per step."""
    parents = ctx.model.parents

    def unit(w: Writer, i: int) -> None:
        if parents[i] < 0:
            w.line(f"for (int k = 0; k < 12; ++k) {oX.at(i)}[k] = {X.at(i)}[k];")
        else:
            w.line(f"compose({oX.at(parents[i])}, {X.at(i)}, {oX.at(i)});")

    ctx.strategy.schedule(w, ctx.model.levels, unit, "world poses")


def emit_frame_pose(w: Writer, frame: Frame, oX: Buffer, name: str) -> None:
    """Declare `name[12]`: the world pose of `frame` (fixed to a body or the world)."""
    if frame.body < 0:
        w.line(f"const T {name}[12] = {placement_literal(frame.placement)};")
    elif is_identity(frame.placement):
        w.line(f"const T* {name} = {oX.at(frame.body)};")
    else:
        w.line(f"const T {name}_offset[12] = {placement_literal(frame.placement)};")
        w.line(f"T {name}[12];")
        w.line(f"compose({oX.at(frame.body)}, {name}_offset, {name});")


def _kinematic_layout(ctx: EmitContext, name: str) -> Layout:
    L = Layout(name)
    L.add("q", ctx.model.nq, doc="configuration")
    L.add("X", 12, ctx.model.nb, doc="parent -> body placements")
    L.add("oX", 12, ctx.model.nb, doc="world poses of the bodies")
    return L


def end_effector_pose(ctx: EmitContext) -> AlgorithmSpec:
    nee = len(ctx.ee_frames)
    L = _kinematic_layout(ctx, "end_effector_pose")
    port_q = Port("q", ctx.model.nq)

    def ee_unit(w: Writer, e: int) -> None:
        frame = ctx.ee_frames[e]
        w.comment(f"end effector {e}: frame '{comment_text(frame.name)}'")
        emit_frame_pose(w, frame, L["oX"], "P")
        for k in range(3):
            w.line(f"out[{6 * e + k}] = P[{9 + k}];")
        w.line(f"rotation_to_rpy(P, out + {6 * e + 3});")

    def body(w: Writer) -> None:
        emit_load(ctx, w, [(L["q"], port_q)])
        emit_joint_transforms(ctx, w, L["q"], L["X"])
        emit_world_poses(ctx, w, L["X"], L["oX"])
        ctx.strategy.schedule(w, [tuple(range(nee))], ee_unit, "end-effector poses")

    return AlgorithmSpec(
        name="end_effector_pose",
        doc=f"End-effector poses [xyz, rpy] of {nee} frame(s): out (6 * {nee}).",
        inputs=(port_q,), output_shape=(6 * nee,), uses_gravity=False,
        layout=L, emit_body=body)


def _dof_ranges(ctx: EmitContext, frame: Frame) -> list[tuple[int, int]]:
    """The tangent indices moving `frame`, merged into half-open ranges."""
    if frame.body < 0:
        return []
    dofs = sorted(k for j in ctx.model.ancestors(frame.body)
                  for k in range(ctx.model.joints[j].idx_v,
                                 ctx.model.joints[j].idx_v + ctx.model.joints[j].nv))
    return index_runs(dofs)


def end_effector_pose_gradient(ctx: EmitContext) -> AlgorithmSpec:
    model, nee, nv = ctx.model, len(ctx.ee_frames), ctx.model.nv
    L = _kinematic_layout(ctx, "end_effector_pose_gradient")
    oS = L.add("oS", 6, nv, doc="world motion column of each dof (about the world origin)")
    P = L.add("P", 12, nee, doc="world poses of the end-effector frames")
    port_q = Port("q", model.nq)
    dof_body = ctx.dof_body()

    def column_or_pose(w: Writer, u: int) -> None:
        if u < nv:
            body, d = dof_body[u]
            w.comment(f"dof {u}: joint '{comment_text(model.joints[body].name)}'")
            emit_subspace_column(w, model.joints[body], d, "S")
            w.line(f"motion_to_parent({L['oX'].at(body)}, S, {oS.at(u)});")
        else:
            e = u - nv
            emit_frame_pose(w, ctx.ee_frames[e], L["oX"], "pose")
            w.line(f"for (int k = 0; k < 12; ++k) {P.at(e)}[k] = pose[k];")

    def body(w: Writer) -> None:
        emit_load(ctx, w, [(L["q"], port_q)])
        emit_joint_transforms(ctx, w, L["q"], L["X"])
        emit_world_poses(ctx, w, L["X"], L["oX"])
        ctx.strategy.schedule(w, [tuple(range(nv + nee))], column_or_pose,
                              "dof columns and end-effector poses")
        with ctx.strategy.parallel(w, "entry", nee * nv):
            w.line(f"const int e = entry / {nv};")
            w.line(f"const int k = entry % {nv};")
            w.line(f"T* o = out + 6 * e * {nv} + k;")
            w.line("bool active = false;")
            with w.block("switch (e)"):
                for e, frame in enumerate(ctx.ee_frames):
                    ranges = _dof_ranges(ctx, frame)
                    cond = " || ".join(f"(k >= {a} && k < {b})" for a, b in ranges) or "false"
                    w.line(f"case {e}: active = {cond}; break;")
                w.line("default: break;")
            with w.block("if (!active)"):
                w.line(f"for (int r = 0; r < 6; ++r) o[r * {nv}] = T(0);")
            with w.block("else"):
                w.line(f"const T* pose = {P.var} + 12 * e;")
                w.line(f"const T* col = {oS.var} + 6 * k;")
                w.line("T wxp[3];")
                w.line("cross3(col + 3, pose + 9, wxp);")
                for r in range(3):
                    w.line(f"o[{r * nv}] = col[{r}] + wxp[{r}];")
                w.line("const T cp2 = pose[0] * pose[0] + pose[3] * pose[3];")
                w.line("const T cp = sqrt_(cp2);")
                w.line("const T droll = (pose[0] * col[3] + pose[3] * col[4]) / cp2;")
                w.line(f"o[{3 * nv}] = droll;")
                w.line(f"o[{4 * nv}] = (pose[0] * col[4] - pose[3] * col[3]) / cp;")
                w.line(f"o[{5 * nv}] = col[5] - pose[6] * droll;")
        ctx.strategy.barrier(w)

    return AlgorithmSpec(
        name="end_effector_pose_gradient",
        doc=(f"d(end-effector [xyz, rpy])/d(tangent): out ({6 * nee} x {nv}), row-major."),
        inputs=(port_q,), output_shape=(6 * nee, nv), uses_gravity=False,
        layout=L, emit_body=body)
