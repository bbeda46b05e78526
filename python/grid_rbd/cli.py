"""`grid-rbd`: register robots, look at them and keep the store tidy, from a shell.

    grid-rbd register NAME [URDF] [options]   compile (or find) a robot; shows the phases
    grid-rbd info NAME|URDF                   dimensions, joints, frames, algorithms,
                                              strategy and store entry
    grid-rbd ls                               the registered robots
    grid-rbd rm NAME...                       forget robots and delete their entries
    grid-rbd gc [--dry-run]                   delete what no registered name refers to
    grid-rbd verify [NAME...]                 re-hash store entries against their records
    grid-rbd bench NAME|URDF [--plot F.png]   time every algorithm at a few batch sizes

`python -m grid_rbd ...` is the same command. The store is `--cache-dir`, else
$GRID_RBD_CACHE_DIR, else ~/.cache/grid-rbd. A NAME that is not registered may be a robot
that ships with grid-rbd (iiwa14), and a URDF argument a path.

Exit status: 0 done; 1 the command ran and found a problem (a damaged entry, a compile
error, a failed benchmark check); 2 the command could not run as asked (bad arguments, an
unknown robot, a missing file). Every failure prints what to do next.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_PROBLEM, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """A failure the user can act on: `message` says what and what to do; `code` is the
    exit status."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


# -- resolving what the user named ------------------------------------------------------
def _store(args: argparse.Namespace) -> Any:
    from grid_rbd._store import Store, cache_root

    return Store(cache_root(args.cache_dir))


def _urdf_for(name_or_path: str, urdf: str | None = None) -> Path:
    """The URDF a command means: an explicit path, an existing file named like that, or a
    bundled robot's packaged URDF."""
    from grid_rbd.data import BUNDLED, bundled_urdf

    if urdf is not None:
        path = Path(urdf)
        if not path.is_file():
            raise CliError(f"no URDF at {urdf}: pass the path of a .urdf file")
        return path
    path = Path(name_or_path)
    if path.suffix in (".urdf", ".xml") or os.sep in name_or_path:
        if not path.is_file():
            raise CliError(f"no URDF at {name_or_path}: pass the path of a .urdf file")
        return path
    if name_or_path in BUNDLED:
        return bundled_urdf(name_or_path)
    raise CliError(f"{name_or_path!r} is no registered robot, URDF file or bundled robot "
                   f"({', '.join(sorted(BUNDLED))}); `grid-rbd ls` lists the registered "
                   "ones, `grid-rbd register NAME path/to/robot.urdf` adds one")


def _bundled() -> dict[str, str]:
    from grid_rbd.data import BUNDLED

    return BUNDLED


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


# -- register ------------------------------------------------------------------------------
def _register_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "floating_base": args.floating_base, "dtype": args.dtype, "device": args.device,
        "max_batch_size": args.max_batch_size, "runtime_inertia": args.runtime_inertia,
        "cache_dir": args.cache_dir,
    }
    if args.algorithms:
        kwargs["algorithm_list"] = _csv(args.algorithms)
    if args.ee_joint_names:
        kwargs["ee_joint_names"] = _csv(args.ee_joint_names)
    if getattr(args, "strategy", None):
        kwargs["strategy"] = args.strategy
    return kwargs


def _register(name: str, urdf: Path, kwargs: dict[str, Any], force: bool = False) -> Any:
    """register_robot with the CLI's error translation."""
    import grid_rbd
    from grid_codegen import URDFError
    from grid_codegen.compile import CompileError

    try:
        return grid_rbd.register_robot(name, urdf_path=urdf, force_rebuild=force, **kwargs)
    except TypeError as exc:
        if "strategy" in kwargs and "strategy" in str(exc):
            raise CliError("this grid-rbd's register_robot takes no strategy; leave out "
                           "--strategy") from None
        raise
    except URDFError as exc:
        raise CliError(f"{exc}\nfix the URDF and run the command again", EXIT_PROBLEM) from None
    except CompileError as exc:
        raise CliError(f"{exc}\nthe compiler's log is named above; a compiler other than "
                       "$GRID_RBD_CXX / $GRID_RBD_NVCC may help", EXIT_PROBLEM) from None
    except (ValueError, FileNotFoundError) as exc:
        raise CliError(f"{exc}\nsee `grid-rbd register --help`") from None
    except RuntimeError as exc:  # device="cuda" without a GPU
        raise CliError(f"{exc}\ntry --device cpu") from None


_BUILD_DEFAULTS = {"floating_base": False, "dtype": "float32", "device": "auto",
                   "algorithms": None, "ee_joint_names": None, "max_batch_size": 65536,
                   "runtime_inertia": False, "strategy": None}


def _build_options_given(args: argparse.Namespace) -> bool:
    """Whether any build option differs from its default (then `bench` registers with
    them instead of timing the robot as it was registered)."""
    return any(getattr(args, k) != v for k, v in _BUILD_DEFAULTS.items())


def cmd_register(args: argparse.Namespace) -> int:
    if args.progress:
        os.environ["GRID_RBD_PROGRESS"] = args.progress
    urdf = _urdf_for(args.name, args.urdf)
    handle = _register(args.name, urdf, _register_kwargs(args), force=args.force_rebuild)
    reg = handle.registration
    how = {"hit": "found in the store", "content": "generated sources matched an entry",
           "built": "built"}.get(reg.outcome, reg.outcome)
    print(f"registered {args.name!r}: {how} in {reg.seconds:.2f} s; device {handle.device}, "
          f"{handle.dtype}, nq={handle.nq} nv={handle.nv} nb={handle.nb}")
    print(f"  entry {reg.entry_dir}")
    handle.close()
    return EXIT_OK


# -- info ----------------------------------------------------------------------------------
def _model_facts(urdf: Path, floating_base: bool) -> dict[str, Any]:
    """What the URDF itself says (no compile): dimensions, joints, bodies, frames."""
    from grid_codegen import URDFError, parse_urdf
    from grid_codegen.options import CodegenOptions

    try:
        model = parse_urdf(urdf, floating_base=floating_base)
    except URDFError as exc:
        raise CliError(f"{exc}\nfix the URDF and run the command again", EXIT_PROBLEM) from None
    options = CodegenOptions()
    return {
        "robot_name": model.name, "source": str(urdf), "registered": False,
        "floating_base": floating_base, "nq": model.nq, "nv": model.nv, "nb": model.nb,
        "joint_names": list(model.joint_names), "body_names": list(model.body_names),
        "ee_frames": [{"name": f.name, "kind": f.kind, "body": int(f.body)}
                      for f in model.end_effector_frames(None)],
        "frames": [{"name": f.name, "kind": f.kind, "body": int(f.body)}
                   for f in model.frames],
        "algorithms": list(options.algorithms), "strategy": options.to_dict().get("strategy"),
    }


def _entry_facts(store: Any, name: str, record: dict[str, Any]) -> dict[str, Any]:
    from grid_rbd._integrity import is_digest

    key = record.get("content_key")
    facts: dict[str, Any] = {"registered": True, "name": name, "record": record}
    if not is_digest(key) or not (store.entries / key).is_dir():
        facts["entry"] = None
        return facts
    path = store.entries / key
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, ValueError) as exc:
        raise CliError(f"the entry of {name!r} ({path}) has no readable meta.json ({exc}); "
                       f"run `grid-rbd verify {name}`", EXIT_PROBLEM) from None
    from grid_rbd._store_admin import folder_size

    options = meta.get("options", {})
    facts.update({
        "entry": str(path), "entry_bytes": folder_size(path),
        "robot_name": meta.get("robot_name"), "source": meta.get("built_from", {}).get(
            "urdf_source"), "floating_base": meta.get("floating_base"),
        "nq": meta.get("nq"), "nv": meta.get("nv"), "nb": meta.get("nb"),
        "joint_names": meta.get("joint_names"), "body_names": meta.get("body_names"),
        "ee_frames": meta.get("ee_frames"), "algorithms": options.get("algorithms"),
        "strategy": options.get("strategy"), "dtype": meta.get("dtype"),
        "backend": meta.get("backend"), "archs": meta.get("archs"),
        "max_batch_size": options.get("max_batch_size"),
        "runtime_inertia": options.get("runtime_inertia"),
        "package_version": meta.get("package_version"), "created": meta.get("created"),
    })
    return facts


def _print_info(facts: dict[str, Any]) -> None:
    title = facts.get("name") or facts.get("robot_name")
    base = "floating base" if facts.get("floating_base") else "fixed base"
    print(f"{title}: robot {facts.get('robot_name')!r}, {base}, nq={facts.get('nq')} "
          f"nv={facts.get('nv')} nb={facts.get('nb')}")
    print(f"  source      {facts.get('source')}")
    joints = facts.get("joint_names") or []
    print(f"  joints ({len(joints)})  {', '.join(joints)}")
    bodies = facts.get("body_names") or []
    print(f"  bodies ({len(bodies)})  {', '.join(bodies)}")
    frames = facts.get("frames")
    if frames is not None:
        print(f"  frames ({len(frames)})  " + ", ".join(f"{f['name']} ({f['kind']})"
                                                      for f in frames))
    ees = facts.get("ee_frames") or []
    print("  end effectors  " + (", ".join(f"{f['name']} ({f['kind']}, body {f['body']})"
                                         for f in ees) or "none"))
    print(f"  algorithms  {', '.join(facts.get('algorithms') or [])}")
    print(f"  strategy    {facts.get('strategy')}")
    if not facts.get("registered"):
        print("  store       not registered (`grid-rbd register NAME URDF` builds it)")
    elif facts.get("entry") is None:
        print(f"  store       the entry {facts['record'].get('content_key')} is missing: "
              f"`grid-rbd register {title} URDF` rebuilds it")
    else:
        print(f"  store       {facts['entry']} ({facts['entry_bytes'] / 1e6:.1f} MB)")
        archs = "" if facts.get("backend") == "cpu" else f" {','.join(facts['archs'] or [])}"
        print(f"  build       {facts.get('backend')}{archs}, {facts.get('dtype')}, "
              f"max batch {facts.get('max_batch_size')}, runtime inertia "
              f"{facts.get('runtime_inertia')}, grid-rbd {facts.get('package_version')}, "
              f"{facts.get('created')}")


def cmd_info(args: argparse.Namespace) -> int:
    store = _store(args)
    record = store.read_manifest().get(args.robot)
    if record is not None and args.urdf is None:
        facts = _entry_facts(store, args.robot, record)
        source = facts.get("source") or record.get("urdf_source")
        # The frame list and, for a missing entry, everything else come from the URDF
        # the robot was registered from, when that file is still there.
        urdf = Path(source) if source and Path(source).is_file() else None
        if urdf is None and args.robot in _bundled():
            urdf = _urdf_for(args.robot)
        if urdf is not None:
            model = _model_facts(urdf, bool(facts.get("floating_base")))
            facts.update({k: v for k, v in model.items()
                          if k == "frames" or facts.get(k) is None})
            facts["registered"] = True
    else:
        facts = _model_facts(_urdf_for(args.robot, args.urdf), args.floating_base)
    if args.json:
        print(json.dumps(facts, indent=1, sort_keys=True))
    else:
        _print_info(facts)
    return EXIT_OK


# -- ls / rm / gc / verify -----------------------------------------------------------------
def cmd_ls(args: argparse.Namespace) -> int:
    from grid_rbd._integrity import is_digest
    from grid_rbd._store_admin import folder_size

    store = _store(args)
    manifest = store.read_manifest()
    rows = []
    for name, rec in sorted(manifest.items()):
        key = rec.get("content_key")
        path = store.entries / key if is_digest(key) else None
        present = path is not None and path.is_dir()
        rows.append({"name": name, "backend": rec.get("backend"), "dtype": rec.get("dtype"),
                     "content_key": key, "present": present,
                     "bytes": folder_size(path) if present else 0,
                     "registered": rec.get("registered")})
    if args.json:
        print(json.dumps(rows, indent=1))
        return EXIT_OK
    if not rows:
        print(f"no robots registered in {store.root} (`grid-rbd register NAME URDF`)")
        return EXIT_OK
    width = max(len(r["name"]) for r in rows)
    print(f"{'name':<{width}}  backend  dtype    entry         size      registered")
    for r in rows:
        entry = str(r["content_key"])[:12] if r["present"] else "MISSING"
        print(f"{r['name']:<{width}}  {r['backend']!s:<7}  {r['dtype']!s:<7}  {entry:<12}  "
              f"{r['bytes'] / 1e6:6.1f} MB  {r['registered']}")
    print(f"({len(rows)} in {store.root})")
    return EXIT_OK


def _report_removal(removal: Any, dry_run: bool) -> None:
    verb = "would delete" if dry_run else "deleted"
    print(f"{verb} {len(removal.entries)} entries, {len(removal.pointers)} pointers and "
          f"{len(removal.other)} other items ({removal.bytes_freed / 1e6:.1f} MB)")
    for key in removal.entries:
        print(f"  store/{key}")
    if removal.kept_young:
        print(f"kept {removal.kept_young} items written in the last ten minutes (a "
              "registration may be recording them); --min-age 0 deletes them too")


def cmd_rm(args: argparse.Namespace) -> int:
    from grid_rbd._store_admin import collect_garbage, remove_names

    store = _store(args)
    manifest = store.read_manifest()
    unknown = [n for n in args.names if n not in manifest]
    if unknown:
        raise CliError(f"not registered: {', '.join(unknown)} (registered: "
                       f"{', '.join(sorted(manifest)) or 'none'}); nothing was removed")
    removed = remove_names(store, args.names)
    print(f"forgot {', '.join(removed)}")
    if not args.keep_entries:
        _report_removal(collect_garbage(store, min_age_s=0.0), dry_run=False)
    return EXIT_OK


def cmd_gc(args: argparse.Namespace) -> int:
    from grid_rbd._store_admin import collect_garbage

    store = _store(args)
    _report_removal(collect_garbage(store, dry_run=args.dry_run, min_age_s=args.min_age),
                    args.dry_run)
    return EXIT_OK


def cmd_verify(args: argparse.Namespace) -> int:
    store = _store(args)
    if args.names:
        manifest = store.read_manifest()
        unknown = [n for n in args.names if n not in manifest]
        if unknown:
            raise CliError(f"not registered: {', '.join(unknown)}")
        report = {f"manifest.json:{n}": [] for n in args.names}
        for name in args.names:
            key = manifest[name].get("content_key")
            report[f"store/{key}"] = store.verify_entry(str(key))
    else:
        report = store.verify_all()
    bad = {item: problems for item, problems in report.items() if problems}
    if args.json:
        print(json.dumps({"checked": len(report), "problems": bad}, indent=1, sort_keys=True))
    else:
        for item, problems in sorted(bad.items()):
            print(f"DAMAGED {item}: {'; '.join(problems)}")
        print(f"checked {len(report)} items in {store.root}: "
              + ("all sound" if not bad else f"{len(bad)} with problems"))
    if bad and args.quarantine:
        for item in sorted(bad):
            if item.startswith("store/"):
                moved, _ = store.quarantine(item[len("store/"):], bad[item], force=True)
                print(f"  moved {item} to {moved}" if moved else f"  could not move {item}")
    if bad and not args.json:
        print("damaged entries are rebuilt by `grid-rbd register NAME URDF` (after "
              "`grid-rbd verify --quarantine` moves them aside); `grid-rbd gc` deletes "
              "what no name refers to", file=sys.stderr)
    return EXIT_PROBLEM if bad else EXIT_OK


# -- bench ---------------------------------------------------------------------------------
def cmd_bench(args: argparse.Namespace) -> int:
    from grid_rbd._bench import plot_results, print_table, run_bench

    if args.progress:
        os.environ["GRID_RBD_PROGRESS"] = args.progress
    store = _store(args)
    registered = args.robot in store.read_manifest()
    if registered and args.urdf is None and not _build_options_given(args):
        import grid_rbd

        handle = grid_rbd.get_robot(args.robot, cache_dir=args.cache_dir)  # as registered
    else:
        handle = _register(args.robot, _urdf_for(args.robot, args.urdf), _register_kwargs(args))
    try:
        batches = [int(b) for b in _csv(args.batch)]
    except ValueError:
        raise CliError(f"--batch takes comma-separated integers, got {args.batch!r}") from None
    if not batches or min(batches) < 1 or max(batches) > handle.max_batch_size:
        raise CliError(f"--batch sizes must lie in [1, {handle.max_batch_size}] (the robot's "
                       f"max batch), got {args.batch!r}")
    algorithms = _csv(args.only) if args.only else list(handle.algorithms)
    unknown = sorted(set(algorithms) - set(handle.algorithms))
    if unknown:
        raise CliError(f"{', '.join(unknown)}: not built into this robot (it has "
                       f"{', '.join(handle.algorithms)})")
    results = run_bench(handle, algorithms, batches, args.seconds, seed=args.seed)
    handle.close()
    print_table(results, handle)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {args.json}")
    if args.plot:
        try:
            plot_results(results, Path(args.plot), title=f"{args.robot} ({handle.device}, "
                                                         f"{handle.dtype})")
        except ImportError:
            raise CliError("--plot needs matplotlib: pip install matplotlib", EXIT_PROBLEM
                           ) from None
        print(f"wrote {args.plot}")
    return EXIT_OK


# -- the parser ----------------------------------------------------------------------------
def _add_build_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--floating-base", action="store_true",
                   help="add a free-flyer root joint (q = [p, quat xyzw, joints])")
    p.add_argument("--dtype", choices=("float32", "float64"), default=_BUILD_DEFAULTS["dtype"])
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=_BUILD_DEFAULTS["device"],
                   help="auto: the GPU when one is usable, else the CPU (default)")
    p.add_argument("--algorithms", metavar="A,B",
                   help="comma-separated algorithm or profile names (core, centroidal, "
                   "all); default: core")
    p.add_argument("--ee-joint-names", metavar="J1,J2",
                   help="joints whose frames are the end effectors (default: leaf bodies)")
    p.add_argument("--max-batch-size", type=int, default=_BUILD_DEFAULTS["max_batch_size"])
    p.add_argument("--runtime-inertia", action="store_true",
                   help="inertias from a per-context table (set_inertia_params)")
    p.add_argument("--strategy", help="the kernel strategy (default: the generator's)")
    p.add_argument("--progress", choices=("auto", "tty", "log", "off"),
                   help="the cold build's phase display (default $GRID_RBD_PROGRESS, auto)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grid-rbd", description=__doc__.split("\n\n")[0],
        epilog="Exit status: 0 done, 1 a problem was found, 2 bad usage. "
               "`grid-rbd COMMAND --help` for each command.")
    from grid_rbd import __version__

    parser.add_argument("--version", action="version", version=f"grid-rbd {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--cache-dir", metavar="DIR",
                        help="the store (default $GRID_RBD_CACHE_DIR, else ~/.cache/grid-rbd)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("register", parents=[common], help="compile (or find) a robot",
                       description="Compile a robot into the store, or find it there, "
                       "showing the build's phases.")
    p.add_argument("name", help="the name to register it under (a bundled robot's name "
                                "needs no URDF)")
    p.add_argument("urdf", nargs="?", help="the URDF file")
    _add_build_options(p)
    p.add_argument("--force-rebuild", action="store_true")
    p.set_defaults(run=cmd_register)

    p = sub.add_parser("info", parents=[common], help="what a robot is and where it is",
                       description="Dimensions, joints, bodies, frames, algorithms, "
                       "strategy and store entry of a registered robot, a bundled robot or "
                       "a URDF file (nothing is compiled).")
    p.add_argument("robot", help="a registered name, a bundled robot or a URDF path")
    p.add_argument("urdf", nargs="?", help="read this URDF (instead of the store's entry)")
    p.add_argument("--floating-base", action="store_true", help="for a URDF: as floating base")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=cmd_info)

    p = sub.add_parser("ls", parents=[common], help="list the registered robots",
                       description="The registered robots: backend, dtype, entry, size.")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=cmd_ls)

    p = sub.add_parser("rm", parents=[common], help="forget robots, delete their entries",
                       description="Remove names from the store's manifest, then delete "
                       "the entries no other name refers to.")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.add_argument("--keep-entries", action="store_true",
                   help="only forget the names (`grid-rbd gc` deletes the entries later)")
    p.set_defaults(run=cmd_rm)

    p = sub.add_parser("gc", parents=[common], help="delete what no name refers to",
                       description="Delete entries and pointers no registered name "
                       "reaches, quarantined entries, failed-build logs and dead staging "
                       "folders.")
    p.add_argument("--dry-run", action="store_true", help="only say what would go")
    p.add_argument("--min-age", type=float, default=600.0, metavar="SECONDS",
                   help="keep entries written more recently than this (default 600)")
    p.set_defaults(run=cmd_gc)

    p = sub.add_parser("verify", parents=[common], help="check store entries",
                       description="Re-hash entries against their integrity records and "
                       "check the manifest and pointers. Exit 1 when anything is damaged.")
    p.add_argument("names", nargs="*", metavar="NAME", help="only these robots' entries")
    p.add_argument("--quarantine", action="store_true",
                   help="move damaged entries aside (register rebuilds them)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=cmd_verify)

    p = sub.add_parser("bench", parents=[common], help="a quick local benchmark",
                       description="Time every algorithm of a robot at a few batch sizes "
                       "(median of warm calls into preallocated outputs) and print a "
                       "table; --plot writes a PNG (needs matplotlib).")
    p.add_argument("robot", help="a registered name, a bundled robot or a URDF path")
    p.add_argument("urdf", nargs="?", help="the URDF file")
    _add_build_options(p)
    p.add_argument("--batch", default="1,64,1024", metavar="B1,B2",
                   help="batch sizes (default 1,64,1024)")
    p.add_argument("--only", metavar="A,B", help="time only these algorithms")
    p.add_argument("--seconds", type=float, default=0.2,
                   help="time budget per algorithm and batch (default 0.2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="also plot ns/item against batch")
    p.set_defaults(run=cmd_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The `grid-rbd` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "run", None) is None:
        parser.print_help()
        return EXIT_USAGE
    from grid_rbd._store import StoreError

    try:
        return int(args.run(args))
    except CliError as exc:
        print(f"grid-rbd {args.command}: {exc}", file=sys.stderr)
        return exc.code
    except StoreError as exc:
        print(f"grid-rbd {args.command}: {exc}", file=sys.stderr)
        return EXIT_PROBLEM
    except KeyboardInterrupt:
        print(f"grid-rbd {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
