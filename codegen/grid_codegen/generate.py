"""`generate(model, options)`: the generated sources of one artifact.

Returns `{"grid.cuh": ..., "wrapper.cu": ...}`. `grid.cuh` holds, in namespace `grid`
and templated on the scalar: the portability prelude, spatial algebra and SIMD vectors
(the real headers of `grid_codegen/include/grid`), the robot's dimensions, the traced
passes of the thread strategy (each emitted once, shared by the kernels that call them),
then per algorithm and variant its item function, kernel and host launcher. `wrapper.cu`
instantiates everything for the options' dtype and exports the descriptor with its
variants and default dispatch tables. Identical inputs give byte-identical text.
"""

from __future__ import annotations

from collections.abc import Sequence

from grid_codegen import dispatch, transforms
from grid_codegen.emit import (
    BUILDERS,
    idsva_gather,
    idsva_gather_layout,
    idsva_head_groups,
    plant,
    regressor_warp,
)
from grid_codegen.emit.algorithm import EmitContext, emit_level_item
from grid_codegen.emit.directions import directions_applicable, emit_directions_variant
from grid_codegen.emit.kernels import (
    STAGE_MAX_WIDTH,
    VariantInfo,
    emit_level_variant,
    emit_thread_variant,
)
from grid_codegen.emit.prelude import emit_prelude
from grid_codegen.emit.strategy import make_strategy
from grid_codegen.emit.tangents import emit_tangents_variant, tangents_applicable
from grid_codegen.emit.thread import (
    TooLarge,
    build_direction_items,
    build_tangent_item,
    build_thread_item,
)
from grid_codegen.emit.thread_parts import build_parts
from grid_codegen.emit.unit_sections import UnitSections
from grid_codegen.emit.wrapper import AlgorithmBuild, emit_unit, emit_wrapper, unit_file
from grid_codegen.emit.writer import Writer, comment_text
from grid_codegen.joint_dynamics import JointDynamics
from grid_codegen.model import JointType, RobotModel
from grid_codegen.options import CodegenOptions
from grid_codegen.registry import MAX_INPUTS, Algorithm, Dims, algorithm
from grid_codegen.symbolic.emit import PassLibrary


def generate(model: RobotModel, options: CodegenOptions | None = None,
             units: bool = False, device_api: bool = False,
             contact_frames: tuple[str, ...] = (), collision: object = None, *,
             split_dir: str | None = None) -> dict[str, str]:
    """The files of the artifact for `model`: file name -> text.

    units: put each algorithm's kernels in a translation unit of its own
    (`unit_<algorithm>.cu`, compiled in parallel by `grid_codegen.compile`); by default
    `wrapper.cu` instantiates everything (one compiler run).
    device_api: append `namespace grid::device` (`grid_codegen.emit.device_api`), the
    consumer-facing API, naming `contact_frames` when given; off by default, so a
    registration's text (and store key) does not depend on it.
    split_dir: also return, under `split_dir/`, the files `units=True` gives (`grid.cuh`,
    the wrapper that only declares the kernels, the `unit_<algorithm>.cu`), beside the
    files `units` asks for; both from one trace. The Bazel generate action's folder of
    units (tools/bazel/grid_robot.bzl), compiled by `python -m grid_codegen compile
    --source-dir`."""
    options = options or CodegenOptions()
    ee_frames = model.end_effector_frames(options.ee_joint_names or None)
    dims = Dims(model.reduced_nq, model.reduced_nv, model.nb, len(ee_frames),
                # collision: the SphereModel the collision profile bakes in (keyword)
                *((len(collision.spheres), len(collision.pairs)) if collision else ()))
    strategies = dispatch.strategies_for(options.strategy)
    jd = JointDynamics.of(model, options)
    joint_table = jd.table_size if jd is not None and jd.runtime else 0
    transform_table = transforms.table_size(model) if options.runtime_transform else 0
    if transform_table and device_api:
        raise ValueError("the consumer device API (device_api=True) does not take the "
                         "runtime transform table yet; build it without runtime_transform")

    library = PassLibrary()
    thread_items = Writer()
    kernels = Writer()
    # Units read only their sections of the header, unless the collision profile's text
    # calls into them: emit.unit_sections. The header is the same in every case (a build
    # of all of it reads every section); the device API is left out of every unit.
    sections = UnitSections(library, thread_items, kernels, partial=collision is None)
    builds: list[AlgorithmBuild] = []
    for name in options.algorithms:
        with sections.section(name):
            entry = algorithm(name)
            variants: list[VariantInfo] = []
            ops = 0
            # Algorithms without a level-synchronous emitter (the centroidal profile) have
            # the thread strategy only, whatever was asked for.
            levels = name in BUILDERS and levels_cover(model)
            wanted = strategies if levels else ("thread",)
            if "thread" in wanted:
                checkpoint = library.checkpoint()
                text = Writer()
                limit = (None if options.strategy == "thread" or not levels
                         else dispatch.THREAD_MAX_OPS)
                try:
                    item = build_thread_item(library, model, ee_frames, options.runtime_inertia,
                                             entry, dims, text, limit, joint_dynamics=jd,
                                             runtime_transform=options.runtime_transform,
                                             collision=collision)
                except TooLarge as exc:
                    library.rollback(checkpoint)
                    ops = exc.ops
                else:
                    if limit is not None and item.ops > limit:
                        library.rollback(checkpoint)
                    else:
                        thread_items.extend(text)
                        thread_items.line()
                        def build(part, writer, entry=entry):
                            return build_thread_item(
                                library, model, ee_frames, options.runtime_inertia, entry, dims,
                                writer, joint_dynamics=jd,
                                runtime_transform=options.runtime_transform,
                                collision=collision, part=part).ops

                        parts = build_parts(library, entry, dims, item.ops, build, thread_items)
                        variants.append(emit_thread_variant(
                            kernels, entry, dims, item.name, item.ops, bool(joint_table),
                            bool(transform_table), row=plant.staged_row(entry, dims),
                            parts=parts))
                    ops = item.ops
            for strategy in wanted:
                if strategy == "thread":
                    continue
                ctx = EmitContext(model=model, options=options, strategy=make_strategy(strategy),
                                  ee_frames=ee_frames, joint_dynamics=jd)
                spec = BUILDERS[name](ctx)
                _check_ports(spec, entry, dims)
                item_name = emit_level_item(ctx, kernels, spec)
                variants.append(emit_level_variant(
                    kernels, entry, dims, strategy, item_name, spec.layout.size_constant,
                    ops, ctx.strategy.threads_per_block(), joint_table, transform_table))
            modelled = [_model_variant(v, max(v.ops, ops), entry, dims) for v in variants]
            builds.append(_build(entry, dims, options, variants, modelled))

    _add_tangents_variant(builds, sections, model, ee_frames, dims, options,
                          jd is not None, transform_table)
    _add_directions_variant(builds, sections, model, ee_frames, dims, options, joint_table,
                            transform_table)
    _add_gather_variant(builds, sections, model, ee_frames, dims, options, joint_table,
                        transform_table)
    _add_regressor_warp_variant(builds, sections, model, ee_frames,
                                dims, options, jd, transform_table)
    if device_api and collision is not None:  # the world distances' kinematics item
        from grid_codegen.collision.emit import build_kinematics_item

        build_kinematics_item(library, model, thread_items)
    w = Writer()
    emit_prelude(w, model.name)
    w.line()
    if collision is not None:  # grid/collision.h and the robot's collision tables
        from grid_codegen.collision.emit import emit_tables

        emit_tables(w, model, collision)
    with w.namespace("grid"):
        w.line()
        _emit_robot_constants(w, model, options, dims)
        if library.passes:
            w.comment("---- thread strategy: traced passes, then item functions ----")
            w.line()
            sections.emit_passes(w)
            sections.emit_items(w)
        w.comment("---- kernels and launchers ----")
        w.line()
        sections.emit_kernels(w)
    if device_api:
        from grid_codegen.emit.device_api import emit_device_api

        built = [(b.algorithm.name, tuple(v.strategy for v in b.variants)) for b in builds]
        w.raw("#if !defined(GRID_UNIT)  // a split build's units leave out the device API")
        emit_device_api(w, model, options, dims, ee_frames, built, tuple(contact_frames),
                        collision)
        w.raw("#endif  // !defined(GRID_UNIT)")
    header = w.text()
    files = {"grid.cuh": header, "wrapper.cu": emit_wrapper(model, options, dims, builds,
                                                           units, jd)}
    unit_files = ({unit_file(b.algorithm.name):
                   emit_unit(model, options, b, sections.needs(b.algorithm.name),
                             sections.weight(b.algorithm.name))
                   for b in builds}
                  if units or split_dir is not None else {})
    if units:
        files.update(unit_files)
    if split_dir is not None:
        split = {"grid.cuh": header,
                 "wrapper.cu": emit_wrapper(model, options, dims, builds, True, jd),
                 **unit_files}
        files.update((f"{split_dir}/{name}", text) for name, text in split.items())
    return files


def _add_tangents_variant(builds: list[AlgorithmBuild], sections: UnitSections,
                          model: RobotModel, ee_frames: tuple, dims: Dims,
                          options: CodegenOptions, joint_dynamics: bool,
                          transform_table: int) -> None:
    """The tangents strategy (`emit.tangents`) of the FD gradient and the fused step
    gradients: one forward-mode pass per (item, column); their default dispatch tables
    are recomputed with it. Not with joint dynamics (the pass traces no passive
    torques)."""
    if not levels_cover(model):
        return
    for k, build in enumerate(builds):
        if not tangents_applicable(build.algorithm, options.strategy, joint_dynamics):
            continue
        with sections.section(build.algorithm.name):
            item = build_tangent_item(sections.library, model, ee_frames,
                                      options.runtime_inertia, build.algorithm, dims,
                                      sections.items, options.runtime_transform)
            sections.items.line()
            variant = emit_tangents_variant(sections.kernels, build.algorithm, dims,
                                            item.name, item.ops, bool(transform_table))
        columns = build.algorithm.output_shape(dims)[-1]
        builds[k] = _with_variant(build, variant, dispatch.Variant(
            "tangents", item.ops, item.ops * columns), dims, options)


def _add_directions_variant(builds: list[AlgorithmBuild], sections: UnitSections,
                            model: RobotModel, ee_frames: tuple, dims: Dims,
                            options: CodegenOptions, joint_table: int,
                            transform_table: int) -> None:
    """idsva_so's directions strategy (`emit.directions`) beside its thread strategy;
    its default dispatch tables are recomputed with it."""
    at = {b.algorithm.name: k for k, b in enumerate(builds)}
    k = at.get("idsva_so")
    if k is None or not directions_applicable(builds[k].algorithm, options.strategy,
                                              bool(joint_table)):
        return
    build = builds[k]
    with sections.section(build.algorithm.name):
        items = build_direction_items(sections.library, model, ee_frames,
                                      options.runtime_inertia, build.algorithm, dims,
                                      sections.items, options.runtime_transform)
        if not items:
            return
        sections.items.line()
        longest = max(item.ops for item in items)
        variant = emit_directions_variant(sections.kernels, build.algorithm, dims,
                                          [item.name for item in items], longest,
                                          bool(transform_table))
    builds[k] = _with_variant(build, variant, dispatch.Variant(
        "directions", longest, sum(item.ops for item in items)), dims, options)


def _add_gather_variant(builds: list[AlgorithmBuild], sections: UnitSections,
                        model: RobotModel, ee_frames: tuple, dims: Dims,
                        options: CodegenOptions, joint_table: int,
                        transform_table: int) -> None:
    """The gather strategy (`emit.idsva_gather`) of idsva_so and fdsva_so beside their
    others; their default dispatch tables are recomputed with it."""
    for k, build in enumerate(builds):
        if not idsva_gather_layout.applicable(model, build.algorithm, options.strategy,
                                              bool(joint_table)):
            continue
        width = build.algorithm.output_size(dims)
        with sections.section(build.algorithm.name):
            head, tiled = idsva_gather.build_head_items(
                sections.library, model, ee_frames, options.runtime_inertia, build.algorithm,
                dims, sections.items, options.runtime_transform,
                idsva_gather_layout.tile_of(width))
            groups = idsva_head_groups.build_group_items(
                sections.library, model, ee_frames, options.runtime_inertia, build.algorithm,
                dims, sections.items, options.runtime_transform)
            variant = idsva_gather.emit_variant(sections.kernels, model, build.algorithm,
                                                dims, head, tiled, bool(transform_table),
                                                groups)
        lanes = idsva_gather_layout.lane_ops(model, width, build.algorithm.name == "fdsva_so")
        team = idsva_gather_layout.default_team(width)
        first = max((g.ops for g in groups), default=head.ops)
        work = sum(g.ops for g in groups) or head.ops
        builds[k] = _with_variant(build, variant, dispatch.Variant(
            "gather", first + lanes, work + team * lanes), dims, options)


def _add_regressor_warp_variant(builds: list[AlgorithmBuild], sections: UnitSections,
                                model: RobotModel, ee_frames: tuple, dims: Dims,
                                options: CodegenOptions, jd: JointDynamics | None,
                                transform_table: int) -> None:
    """The inverse-dynamics regressor's warp strategy (`emit.regressor_warp`): its
    coalesced row stores beat the thread strategy's item-per-thread stores on wide
    outputs; the default dispatch tables are recomputed with it."""
    at = {b.algorithm.name: k for k, b in enumerate(builds)}
    k = at.get(regressor_warp.NAME)
    if k is None or not regressor_warp.applicable(model, options.algorithms,
                                                  options.strategy):
        return
    build = builds[k]
    joint_table = bool(jd is not None and jd.runtime)
    with sections.section(build.algorithm.name):
        terms = regressor_warp.build_terms(sections.library, model, ee_frames,
                                           options.runtime_inertia, build.algorithm, dims,
                                           sections.items, jd, options.runtime_transform)
        sections.items.line()
        warp = regressor_warp.emit_variant(sections.kernels, model, build.algorithm, dims,
                                           terms, joint_table, bool(transform_table))
    lanes = regressor_warp.lane_ops(model)
    builds[k] = _with_variant(build, warp, dispatch.Variant(
        "columns", terms.ops + lanes, terms.work + regressor_warp.LANES * lanes), dims, options)


def _model_variant(variant: VariantInfo, ops: int, entry: Algorithm, dims: Dims
                   ) -> dispatch.Variant:
    """The cost model's view of a compiled variant at the scale `ops`: a thread variant
    whose item is wider than the staged stores take stores a scalar per transaction."""
    width = entry.output_size(dims)
    wide = variant.strategy == "thread" and width > STAGE_MAX_WIDTH
    return dispatch.Variant(variant.strategy, ops, scattered=width if wide else 0)


def _build(entry: Algorithm, dims: Dims, options: CodegenOptions,
           variants: Sequence[VariantInfo], model: list[dispatch.Variant]) -> AlgorithmBuild:
    """An algorithm's build with its default dispatch tables from the cost model's
    `model` of its `variants`."""
    return AlgorithmBuild(entry, tuple(variants),
                          tuple(dispatch.gpu_dispatch(model, options.max_batch_size)),
                          tuple(dispatch.cpu_dispatch(model)))


def _with_variant(build: AlgorithmBuild, variant: VariantInfo, modelled: dispatch.Variant,
                  dims: Dims, options: CodegenOptions) -> AlgorithmBuild:
    """`build` with one more variant (`modelled`: the cost model's view of it), its
    default dispatch tables recomputed."""
    ops = max(x.ops for x in build.variants)
    model = [_model_variant(x, ops, build.algorithm, dims) for x in build.variants]
    return _build(build.algorithm, dims, options, (*build.variants, variant),
                  [*model, modelled])


def levels_cover(model: RobotModel) -> bool:
    """Whether the level-synchronous (warp, block) emitters cover `model`: trees of
    revolute, prismatic and free-flyer joints without mimic couplings. Other models
    (spherical or planar joints, `mimic=True`) get the thread strategy only, whatever
    strategy was asked for."""
    return model.coupling is None and all(
        j.type.scalar or j.type is JointType.FREE_FLYER for j in model.joints)


def _check_ports(spec, entry, dims: Dims) -> None:
    """The level-synchronous emitters name their ports too: they must be the registry's."""
    got = [(p.name, p.width, p.required) for p in spec.inputs]
    want = [(p.name, p.width(dims), p.required) for p in entry.inputs]
    if got != want or list(spec.output_shape) != list(entry.output_shape(dims)):
        raise AssertionError(f"{entry.name}: emitter ports {got} / {spec.output_shape} differ "
                             f"from the registry's {want} / {entry.output_shape(dims)}")


def _emit_robot_constants(w: Writer, model: RobotModel, options: CodegenOptions,
                          dims: Dims) -> None:
    w.comment(f"Robot '{comment_text(model.name)}': {model.nb} bodies, "
              f"{'floating' if model.floating_base else 'fixed'} base.")
    w.comment("Bodies (joint order): " + ", ".join(
        f"{i} {comment_text(j.name)}" for i, j in enumerate(model.joints)))
    w.line(f"constexpr int kNq = {model.reduced_nq};")
    w.line(f"constexpr int kNv = {model.reduced_nv};")
    w.line(f"constexpr int kNb = {model.nb};")
    w.line(f"constexpr int kNumEes = {dims.num_ees};")
    w.line(f"constexpr int kMaxBatch = {options.max_batch_size};")
    runtime = "true" if options.runtime_inertia else "false"
    w.line(f"constexpr bool kRuntimeInertia = {runtime};")
    w.line()
    w.doc("The arguments of every kernel: per-item inputs and output (batch on axis 0),\n"
          "the runtime inertia table (nb x 10, or NULL) and the signed gravity along z.")
    w.line("template <typename T>")
    with w.block("struct Args", "};"):
        w.line(f"const T* in[{MAX_INPUTS}];")
        w.line("T* out;")
        w.line("const T* inertia;")
        w.line("T gravity;")
        w.line("int batch;")
        if options.runtime_joint_dynamics:
            w.line("const T* joint_dynamics;  // [damping (n) | friction (n)], "
                   "grid_codegen.joint_dynamics")
        if options.runtime_transform:
            w.line("const T* transform;  // 7 per joint: origin [p (3) | quat xyzw (4)], "
                   "grid_codegen.transforms")
    w.line()
