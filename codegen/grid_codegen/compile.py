"""The compile driver: generated sources in, `robot.so` plus `robot.build.log` out.

`backend="cpu"` runs the host C++ compiler on `wrapper.cu` as C++
(`-O2 -std=c++17 -shared -fPIC -x c++`, OpenMP when available); `backend="cuda"` runs
nvcc for each requested architecture plus the one detected on this machine. Every
compiler run gets the environment `compile_environment` builds from nothing (a fixed
PATH, a private TMPDIR per build, LANG=C; nothing else of the caller's but HOME and the
keyed `LD_LIBRARY_PATH`), so include paths, preloads and flag variables of the caller
cannot change an artifact behind its key. The shared object is written under a
temporary name, made owner-only and renamed, so a reader never sees a partial file. A
failed build raises `CompileError`, whose message ends with the tail of the build log.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from grid_codegen.emit.wrapper import UNIT_WEIGHT

LOG_TAIL_LINES = 40
ARTIFACT = "robot.so"
BUILD_LOG = "robot.build.log"


class CompileError(RuntimeError):
    """The compiler failed; `log_path` is the full log, the message ends with its tail."""

    def __init__(self, message: str, log_path: Path) -> None:
        super().__init__(message)
        self.log_path = log_path


@dataclass(frozen=True)
class CompileResult:
    so_path: Path
    log_path: Path
    command: tuple[str, ...]
    seconds: float
    backend: str
    archs: tuple[str, ...]  # ("cpu",) for the host build


# -- the compile environment ----------------------------------------------------------------
SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")
KEYED_ENVIRONMENT = ("LD_LIBRARY_PATH",)
"""Variables passed through to the compiler because a toolchain may need them; their
values are part of the build identity (`keyed_environment`), hence of every key."""


def compile_environment(tmp_dir: str | os.PathLike | None, tools: Sequence[str] = (),
                        environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The complete environment of a compiler run, built from nothing.

    PATH: the folders of `tools` (the compiler, nvcc's host compiler), then
        /usr/local/bin:/usr/bin:/bin: a function of the compiler paths, which are keyed.
    TMPDIR (and TMP, TEMP): `tmp_dir`, a private folder of this build.
    LANG, LC_ALL: C (untranslated ASCII diagnostics; no locale-dependent output).
    HOME: the caller's, when set (compilers read nothing there; wrappers may).
    LD_LIBRARY_PATH: the caller's, when set (`KEYED_ENVIRONMENT`).
    Everything else is dropped, among it CPATH, C_INCLUDE_PATH, CPLUS_INCLUDE_PATH,
    OBJC_INCLUDE_PATH, LIBRARY_PATH, GCC_EXEC_PREFIX, COMPILER_PATH, LD_PRELOAD, LD_AUDIT,
    DEPENDENCIES_OUTPUT, SUNPRO_DEPENDENCIES, SOURCE_DATE_EPOCH, GCC_COMPARE_DEBUG,
    NVCC_PREPEND_FLAGS, NVCC_APPEND_FLAGS, NVCC_CCBIN, CUDA_HOME and every CCACHE_ variable.
    `environ`: the caller's environment (default `os.environ`).
    """
    environ = os.environ if environ is None else environ
    folders: list[str] = []
    for tool in tools:
        folder = os.path.dirname(os.path.abspath(tool))
        if folder not in folders:
            folders.append(folder)
    folders += [f for f in SYSTEM_PATH if f not in folders]
    env = {"PATH": os.pathsep.join(folders), "LANG": "C", "LC_ALL": "C"}
    if tmp_dir is not None:
        env["TMPDIR"] = env["TMP"] = env["TEMP"] = os.fspath(tmp_dir)
    if environ.get("HOME"):
        env["HOME"] = environ["HOME"]
    for name, value in keyed_environment(environ).items():
        if value is not None:
            env[name] = value
    return env


def keyed_environment(environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """The values of `KEYED_ENVIRONMENT` (None when unset): what of the caller's
    environment reaches a compile, so what the build identity must record."""
    environ = os.environ if environ is None else environ
    return {name: environ.get(name) or None for name in KEYED_ENVIRONMENT}


def resolve_tool(tool: str) -> str:
    """`tool` as an absolute path (a bare name is looked up on the caller's PATH), so the
    compile's fixed PATH never picks another one."""
    if os.sep in tool:
        return os.path.abspath(tool)
    found = shutil.which(tool)
    if found is None:
        raise FileNotFoundError(f"compiler {tool!r} is not on PATH")
    return os.path.abspath(found)


def run_compiler(cmd: Sequence[str], tmp_dir: Path, tools: Sequence[str],
                 cwd: str | os.PathLike | None = None, timeout: float | None = None
                 ) -> tuple[int, str]:
    """Run `cmd` in the scrubbed environment; (exit status, stdout and stderr as text).
    Output that is not UTF-8 is kept as backslash escapes: the compiler's error is never
    lost to a decoding error. A timeout is exit -1 with a note."""
    try:
        proc = subprocess.run(list(cmd), cwd=cwd, env=compile_environment(tmp_dir, tools),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=timeout, check=False)
        return proc.returncode, proc.stdout.decode("utf-8", "backslashreplace")
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout or b""
        text = partial.decode("utf-8", "backslashreplace") if isinstance(partial, bytes) \
            else str(partial)
        return -1, text + f"\n[timed out after {timeout} s]\n"


def _write_private(path: Path, text: str, mode: int = 0o600) -> None:
    """Write `text` (UTF-8; unencodable characters escaped) to a file only its owner can
    change, replacing what is there."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="") as fh:
        fh.write(text)
    os.chmod(path, mode)


def find_cxx() -> str:
    for name in (os.environ.get("CXX", ""), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return name
    raise FileNotFoundError("no host C++ compiler found (set CXX, or install g++)")


def find_nvcc() -> str:
    for candidate in (os.environ.get("NVCC", ""), "nvcc",
                      os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin/nvcc")):
        if candidate and shutil.which(candidate):
            return candidate
    raise FileNotFoundError("nvcc not found (set NVCC or CUDA_HOME, or put nvcc on PATH)")


def detect_cuda_arch() -> str | None:
    """`sm_XY` of GPU 0 via nvidia-smi, or None without a visible GPU."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    first = out.strip().splitlines()[0].strip() if out.strip() else ""
    major, _, minor = first.partition(".")
    return f"sm_{major}{minor}" if major.isdigit() and minor.isdigit() else None


@functools.cache
def openmp_works(cxx: str) -> bool:
    """Whether `cxx -fopenmp` builds and links a program (the CPU backend then runs a
    batch across OpenMP threads). Probed once per compiler per process."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.cc"
        src.write_text("#include <omp.h>\n"
                       "int main() { return omp_get_max_threads() > 0 ? 0 : 1; }\n")
        try:
            tool = resolve_tool(cxx)
        except FileNotFoundError:
            return False
        rc, _ = run_compiler([tool, "-fopenmp", str(src), "-o", str(Path(tmp) / "probe")],
                             Path(tmp), [tool], timeout=300)
        return rc == 0


# The flags below are the one definition of how an artifact is compiled: the pip path
# (`compile_artifact`) and the Bazel actions (`python -m grid_codegen compile`, driven by
# tools/bazel/grid_robot.bzl) both build their command lines from them.
def cpu_flags(openmp: bool, isa: Sequence[str] = ()) -> list[str]:
    """Host compiler flags of a CPU artifact (the source is compiled as C++).

    `-fno-math-errno` lets sqrt vectorise (nothing reads errno); `-Wno-psabi` silences
    the note GCC prints for vector arguments without AVX; `isa` adds instruction-set
    flags (`host_isa_flags`), which widen the SIMD vectors of items to one register."""
    flags = ["-O2", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden",
             "-fno-math-errno", "-Wno-psabi", *isa]
    if openmp:
        flags.append("-fopenmp")
    return flags


@functools.cache
def host_isa_flags() -> tuple[str, ...]:
    """`-mavx2 -mfma` when this machine's CPU has both (x86-64 Linux), else nothing.

    Explicit flags rather than `-march=native`: the command line is part of the build
    identity, so an artifact built for AVX2 is never keyed like one a machine without it
    could load. Bazel actions pass no ISA flags (their outputs must not depend on the
    build machine)."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            features = set(line.split(":", 1)[1].split())
            return ("-mavx2", "-mfma") if {"avx2", "fma"} <= features else ()
    return ()


def cuda_flags(archs: Sequence[str]) -> list[str]:
    """nvcc flags of a CUDA artifact: one `-gencode` per `sm_XY` in `archs`, and the
    architecture list the descriptor reports."""
    flags = ["-O3", "-std=c++17", "--shared", "-Xcompiler", "-fPIC",
             "-Xcompiler", "-fvisibility=hidden"]
    for arch in archs:
        number = arch.removeprefix("sm_")
        flags.append(f"-gencode=arch=compute_{number},code=sm_{number}")
    flags.append(f'-DGRID_COMPILED_ARCHS="{",".join(archs)}"')
    return flags


def cpu_command(cxx: str, source: Path, output: Path, openmp: bool,
                extra_flags: Sequence[str], isa: Sequence[str] | None = None) -> list[str]:
    """The host compiler's command line; `isa=None` means this machine's
    (`host_isa_flags`), the Bazel action passes `()`."""
    isa = host_isa_flags() if isa is None else tuple(isa)
    return [cxx, *cpu_flags(openmp, isa), *extra_flags, "-x", "c++", str(source), "-o",
            str(output)]


def cuda_command(nvcc: str, source: Path, output: Path, archs: Sequence[str],
                 extra_flags: Sequence[str]) -> list[str]:
    return [nvcc, *cuda_flags(archs), *extra_flags, str(source), "-o", str(output)]


def build_jobs() -> int:
    """Compiler processes a split build runs at once: `$GRID_RBD_BUILD_JOBS`, else one per
    core. (Not a build knob: it changes how long a build takes, not what it produces.)"""
    value = os.environ.get("GRID_RBD_BUILD_JOBS", "")
    try:
        jobs = int(value) if value else (os.cpu_count() or 1)
    except ValueError:
        jobs = os.cpu_count() or 1
    return max(1, min(jobs, 64))


def unit_sources(names: Sequence[str]) -> list[str]:
    """The sources of a split artifact among `names`, in compile order: `wrapper.cu`, then
    the `unit_<algorithm>.cu` sorted (the names `generate(units=True)` gives)."""
    units = sorted(n for n in names if n.startswith("unit_") and n.endswith(".cu"))
    return ["wrapper.cu", *units]


def _link_flags(flags: Sequence[str], link_only: set[str]) -> list[str]:
    """What of a single-unit command line's flags the link of a split build keeps: the
    shared-object, visibility, optimisation, OpenMP and architecture flags, nvcc's host
    compiler (`-ccbin X`) and library folders (`-L`)."""
    kept: list[str] = []
    keep_next = False
    for flag in flags:
        if keep_next or flag in link_only or flag.startswith(("-gencode", "-L")) or flag in (
                "-Xcompiler", "-fPIC", "-fvisibility=hidden", "-fopenmp", "-O2", "-O3"):
            kept.append(flag)
            keep_next = False
        elif flag == "-ccbin":
            kept.append(flag)
            keep_next = True
    return kept


def unit_weight(path: Path) -> int:
    """A unit's compile weight from its third line (`emit.wrapper.emit_unit`); 0 for a
    source without one (the wrapper)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = [f.readline(200) for _ in range(3)]
    except OSError:
        return 0
    if not head[2].startswith(UNIT_WEIGHT):
        return 0
    value = head[2][len(UNIT_WEIGHT):].strip()
    return int(value) if value.isascii() and value.isdigit() else 0


def compile_units(cmd: list[str], sources: Sequence[str], cwd: str | os.PathLike | None,
                  backend: str, tmp_dir: Path, tools: Sequence[str],
                  timeout: float | None) -> tuple[int, str, list[str]]:
    """Compile each source of a split artifact to an object in `tmp_dir` in parallel
    (`build_jobs()` compilers at once; `cmd`, the single-unit command line of
    `cpu_command` or `cuda_command`, with `-c` in place of the shared-object flags), then
    link the objects into `cmd`'s output. `sources` are named as the compiler sees them,
    from `cwd` (None: this process's); each unit's object is its file name plus `.o`.
    Returns (status, the log of every step, the link command)."""
    from concurrent.futures import ThreadPoolExecutor

    output = cmd[-1]  # "... wrapper.cu -o <output>"
    if not (cmd[-3].endswith("wrapper.cu") and cmd[-2] == "-o"):
        raise AssertionError(f"unexpected compile command {cmd}")
    names = [os.path.basename(source) for source in sources]
    if len(set(names)) != len(names):
        raise ValueError(f"split artifact sources must have distinct names: {names}")
    link_only = {"-shared", "--shared", "-fopenmp"} if backend == "cuda" else {"-shared"}
    compile_flags = [f for f in cmd[:-3] if f not in link_only]
    if backend == "cpu" and "-x" in compile_flags:
        compile_flags.remove("-x")
        compile_flags.remove("c++")

    def one(source: str) -> tuple[int, str]:
        obj = tmp_dir / (os.path.basename(source) + ".o")
        language = ["-x", "c++"] if backend == "cpu" else []
        unit_cmd = [*compile_flags, "-c", *language, source, "-o", str(obj)]
        rc, text = run_compiler(unit_cmd, tmp_dir, tools, cwd=cwd, timeout=timeout)
        return rc, f"$ {' '.join(unit_cmd)}\n{text}"

    # The heaviest units first, so that the longest does not start last; logs and the
    # link keep the order of `sources`.
    heaviest = sorted(sources, key=lambda source: -unit_weight(Path(cwd or ".") / source))
    with ThreadPoolExecutor(max_workers=min(build_jobs(), len(sources))) as pool:
        done = dict(zip(heaviest, pool.map(one, heaviest), strict=True))
    results = [done[source] for source in sources]
    log = "\n".join(text for _, text in results)
    failed = [rc for rc, _ in results if rc != 0]
    objects = [str(tmp_dir / (name + ".o")) for name in names]
    link = [cmd[0], *_link_flags(cmd[1:-3], link_only), *objects, "-o", output]
    if failed:
        return failed[0], log, link
    rc, text = run_compiler(link, tmp_dir, tools, cwd=cwd, timeout=timeout)
    return rc, log + f"\n$ {' '.join(link)}\n{text}", link


def compile_artifact(files: Mapping[str, str], out_dir: str | Path, backend: str = "cpu", *,
                     gpu_archs: Sequence[str] = ("sm_90",), detect_arch: bool = True,
                     openmp: bool = True, compiler: str | None = None,
                     extra_flags: Sequence[str] = (), timeout: float | None = None
                     ) -> CompileResult:
    """Write `files` into `out_dir` and build `out_dir/robot.so` from `wrapper.cu`.

    files: `generate(...)` output (file name -> text; must hold `wrapper.cu`). With the
        `unit_*.cu` translation units of `generate(units=True)`, each unit and the wrapper
        are compiled to objects in parallel (`build_jobs()` at once) and then linked.
    backend: "cpu" (host compiler) or "cuda" (nvcc).
    gpu_archs: CUDA architectures to build; the detected GPU's is added when
        `detect_arch`. compiler: the host compiler or nvcc to use instead of the default.
    Raises `CompileError` (message ends with the build log's tail) when the build fails.
    """
    if backend not in ("cpu", "cuda"):
        raise ValueError(f"backend must be 'cpu' or 'cuda', got {backend!r}")
    if "wrapper.cu" not in files:
        raise ValueError(f"files must include wrapper.cu; got {sorted(files)}")
    out = Path(out_dir)
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    for name in sorted(files):
        _write_private(out / name, files[name])
    so_path, log_path = out / ARTIFACT, out / BUILD_LOG
    staging = out / f".{ARTIFACT}.{os.getpid()}.tmp"
    tools: list[str] = []
    if backend == "cpu":
        tool = resolve_tool(compiler or find_cxx())
        archs: tuple[str, ...] = ("cpu",)
        cmd = cpu_command(tool, out / "wrapper.cu", staging, openmp and openmp_works(tool),
                          extra_flags)
    else:
        tool = resolve_tool(compiler or find_nvcc())
        detected = detect_cuda_arch() if detect_arch else None
        archs = tuple(sorted(set(gpu_archs) | ({detected} if detected else set()),
                             key=lambda a: int(a[3:])))
        cmd = cuda_command(tool, out / "wrapper.cu", staging, archs, extra_flags)
        try:
            tools.append(resolve_tool(find_cxx()))  # nvcc's host compiler, found on PATH
        except FileNotFoundError:
            pass
    # A private temporary folder per build: nvcc names its temporaries by process id,
    # which collides between concurrent sandboxed builds, and nobody else may write there.
    tmp_dir = Path(tempfile.mkdtemp(prefix="tmp_", dir=out))
    start = time.monotonic()
    sources = unit_sources(list(files))
    try:
        if len(sources) > 1:
            rc, output, cmd = compile_units(cmd, [str(out / name) for name in sources], out,
                                            backend, tmp_dir, [tool, *tools], timeout)
        else:
            rc, output = run_compiler(cmd, tmp_dir, [tool, *tools], cwd=out, timeout=timeout)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    seconds = time.monotonic() - start
    log_text = f"$ {' '.join(cmd)}\n{output}\n[exit {rc}, {seconds:.1f} s]\n"
    _write_private(log_path, log_text)
    if rc != 0 or not staging.exists():
        staging.unlink(missing_ok=True)
        tail = "\n".join(log_text.splitlines()[-LOG_TAIL_LINES:])
        raise CompileError(f"{backend} build of {out / 'wrapper.cu'} failed (exit {rc}); "
                           f"full log {log_path}; last lines:\n{tail}", log_path)
    os.chmod(staging, 0o700)  # code: never writable by group or others, whatever the umask
    os.replace(staging, so_path)
    return CompileResult(so_path, log_path, tuple(cmd), seconds, backend, archs)
