"""A seeded URDF fuzzer: mutations of real URDFs, each parsed, classified and checked.

Every case is one to three mutations of a seed document (the robots of the test set),
chosen by a `random.Random(seed)` so a run is reproducible from its seed. A case's
outcome is `"model"` (a `RobotModel` whose invariants hold: at least one degree of
freedom, unit axes, orthonormal rotations, finite non-negative masses, positive
semi-definite inertias, valid names, finite reference dynamics) or `"urdf_error"`.
Anything else is a crash: another exception, a broken invariant, or a parse that runs
past its time limit (a hang).
"""

from __future__ import annotations

import math
import random
import re
import signal
import time
import traceback
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Seed:
    name: str
    data: bytes
    floating_base: bool


def seeds() -> list[Seed]:
    """The URDFs of the test set that are on this machine (iiwa14 always is)."""
    import sys

    sys.path.insert(0, str(REPO / "tests"))
    try:
        from support import ROBOTS, robot_available
    finally:
        sys.path.pop(0)
    return [Seed(r.name, r.path.read_bytes(), r.floating_base)
            for r in ROBOTS.values() if robot_available(r.name)]


# -- mutations --------------------------------------------------------------------------
TOKENS = [b"&#13;", b"&#10;", b"&#9;", b"&#0;", b"&#x202E;", b"&#x2028;", b"&#x85;",
          b"&#xD800;", b"&#xFFFE;", b'<!DOCTYPE r [<!ENTITY e "boom">]>', b"&e;", b"]]>",
          b"<![CDATA[x]]>", b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b'"', b"'",
          b"<", b">", b"&", b"<link name=\"x\"/>", b"<!-- c -->", b"<?pi x?>",
          b'<joint name="jx" type="revolute"><parent link="x"/><child link="y"/></joint>',
          b"<a>" * 300 + b"</a>" * 300, b"\xef\xbb\xbf", b" " * 1000]
VALUES = ["", " ", "nan", "inf", "-inf", "1e309", "-1", "0", "1e-320", "1e200", "-1e200",
          "0 0 0", "1e200 0 0", "1e-300 0 0", "1 2", "1 2 3 4", "x", "1_0", "0x10", "\u0661",
          "1e", ".", "+.5e+3", "9" * 400, "a" * 5000, "\u202eevil", "\u00e9l\u00e9ment",
          "../../etc/passwd", "/abs/path", "j\\", "*/ x /*", '"q"', "%41", "??/", "#define X"]
JOINT_TYPES = ["revolute", "continuous", "prismatic", "fixed", "floating", "planar", "",
               "hinge", "REVOLUTE"]
_ATTRIBUTE = re.compile(rb'(\w+)="([^"]*)"')


def _byte_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    kind = rng.choice(["flip", "delete", "duplicate", "insert", "truncate"])
    n = len(data)
    at = rng.randrange(max(n, 1))
    if kind == "flip":
        value = rng.randrange(256)
        return data[:at] + bytes([value]) + data[at + 1:], f"byte {at} := {value}"
    span = rng.randint(1, max(1, min(400, n // 4)))
    if kind == "delete":
        return data[:at] + data[at + span:], f"delete {span} bytes at {at}"
    if kind == "duplicate":
        return data[:at] + data[at:at + span] * 2 + data[at + span:], f"duplicate {span} at {at}"
    if kind == "insert":
        token = rng.choice(TOKENS)
        return data[:at] + token + data[at:], f"insert {token[:24]!r} at {at}"
    return data[:at], f"truncate at {at}"


def _attribute_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    matches = list(_ATTRIBUTE.finditer(data))
    if not matches:
        return _byte_mutation(data, rng)
    m = rng.choice(matches)
    if rng.random() < 0.2:
        return data[:m.start()] + data[m.end():], f"drop attribute {m.group(1)!r}"
    same = [o.group(2) for o in matches if o.group(1) == m.group(1)]
    if rng.random() < 0.3 and same:
        value = rng.choice(same)  # another element's value: duplicates, cycles, swaps
    else:
        text = rng.choice(VALUES)
        value = "".join(ch if ch.isascii() else f"&#x{ord(ch):X};" for ch in text).encode()
        value = value.replace(b'"', b"&quot;")
    return (data[:m.start(2)] + value + data[m.end(2):],
            f"{m.group(1).decode()}={value[:30]!r}")


def _random_inertia(rng: random.Random) -> str:
    A = np.array([[rng.gauss(0, 1) for _ in range(3)] for _ in range(3)])
    R, _ = np.linalg.qr(A)
    scale = 10 ** rng.uniform(-8, 2)
    moments = np.array(sorted(rng.uniform(0, 1) for _ in range(3))) * scale
    moments[0] = rng.choice([moments[0], 0.0, -1e-7 * scale, -1e-4 * scale, -0.5 * scale])
    I = (R @ np.diag(moments) @ R.T).tolist()
    return (f'ixx="{I[0][0]!r}" ixy="{I[0][1]!r}" ixz="{I[0][2]!r}" iyy="{I[1][1]!r}" '
            f'iyz="{I[1][2]!r}" izz="{I[2][2]!r}"')


def _tree_mutation(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        return _byte_mutation(data, rng)
    links = root.findall("link")
    joints = root.findall("joint")
    elements = list(root.iter())[1:]
    kind = rng.choice(["remove", "duplicate", "move", "type", "swap", "reparent", "axis",
                       "inertia", "all_fixed", "chain"])
    if kind == "remove" and elements:
        victim = rng.choice(elements)
        for parent in root.iter():
            if victim in list(parent):
                parent.remove(victim)
                break
        detail = f"remove <{victim.tag}>"
    elif kind == "duplicate" and (links or joints):
        victim = rng.choice(links + joints)
        root.append(ET.fromstring(ET.tostring(victim)))
        detail = f"duplicate <{victim.tag} {victim.get('name')}>"
    elif kind == "move" and len(elements) > 2:
        victim, host = rng.sample(elements, 2)
        for parent in root.iter():
            if victim in list(parent):
                parent.remove(victim)
                break
        if victim is not host and victim not in list(host.iter()):
            host.append(victim)
        detail = f"move <{victim.tag}> under <{host.tag}>"
    elif kind == "type" and joints:
        joint = rng.choice(joints)
        joint.set("type", rng.choice(JOINT_TYPES))
        detail = f"joint {joint.get('name')} type {joint.get('type')!r}"
    elif kind == "swap" and joints:
        joint = rng.choice(joints)
        p, c = joint.find("parent"), joint.find("child")
        if p is not None and c is not None:
            a, b = p.get("link"), c.get("link")
            p.set("link", b or "")
            c.set("link", a or "")
        detail = f"swap parent/child of {joint.get('name')}"
    elif kind == "reparent" and joints and links:
        joint = rng.choice(joints)
        p = joint.find("parent")
        if p is not None:
            p.set("link", rng.choice(links).get("name") or "")
        detail = f"reparent {joint.get('name')}"
    elif kind == "axis" and joints:
        joint = rng.choice(joints)
        axis = joint.find("axis")
        if axis is None:
            axis = ET.SubElement(joint, "axis")
        text = rng.choice(["0 0 0", "1e200 0 0", "1e-300 1e-300 0", "1e308 1e308 1e308",
                           "0 -1 0", f"{rng.gauss(0, 1)} {rng.gauss(0, 1)} {rng.gauss(0, 1)}"])
        axis.set("xyz", text)
        detail = f"axis of {joint.get('name')} = {text}"
    elif kind == "inertia" and links:
        link = rng.choice(links)
        inertial = link.find("inertial")
        if inertial is None:
            inertial = ET.SubElement(link, "inertial")
            ET.SubElement(inertial, "mass", value="1")
        for old in inertial.findall("inertia"):
            inertial.remove(old)
        inertial.append(ET.fromstring(f"<inertia {_random_inertia(rng)}/>"))
        detail = f"inertia of {link.get('name')}"
    elif kind == "all_fixed" and joints:
        for joint in joints:
            joint.set("type", "fixed")
        detail = "every joint fixed"
    elif kind == "chain":
        depth = rng.choice([50, 500, 2000])
        for k in range(depth):
            ET.SubElement(root, "link", name=f"fz_l{k}")
        base = links[0].get("name") if links else "fz_l0"
        for k in range(depth):
            j = ET.SubElement(root, "joint", name=f"fz_j{k}", type="revolute")
            ET.SubElement(j, "parent", link=base if k == 0 else f"fz_l{k - 1}")
            ET.SubElement(j, "child", link=f"fz_l{k}")
            ET.SubElement(j, "axis", xyz="0 0 1")
        detail = f"append a {depth}-link chain"
    else:
        return _byte_mutation(data, rng)
    return ET.tostring(root), detail


MUTATORS: list[Callable[[bytes, random.Random], tuple[bytes, str]]] = [
    _byte_mutation, _attribute_mutation, _attribute_mutation, _tree_mutation, _tree_mutation]


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, list[str]]:
    """One to three random mutations of `data`; the mutated bytes and what was done."""
    done = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        data, what = rng.choice(MUTATORS)(data, rng)
        done.append(what)
    return data, done


# -- outcomes -----------------------------------------------------------------------------
class Hang(Exception):
    """A case ran past its time limit."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise `Hang` inside the block after `seconds` (main thread only: SIGALRM)."""
    def alarm(*_: object) -> None:
        raise Hang(f"ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_model(model: object, dynamics: bool) -> None:
    """Raise AssertionError when a parsed model breaks an invariant (module doc)."""
    from grid_codegen.model import JointType
    from grid_codegen.urdf_xml import name_problem

    assert model.nv >= 1 and model.nq >= model.nv, "a model without a degree of freedom"
    names = [model.name, *model.joint_names, *model.body_names, *(f.name for f in model.frames)]
    bad = [n for n in names if n != "root_joint" and name_problem(n) is not None]
    assert not bad, f"invalid names in the model: {bad[:3]!r}"
    for joint in model.joints:
        R, p = joint.placement.R, joint.placement.p
        assert np.isfinite(R).all() and np.isfinite(p).all(), f"{joint.name}: non-finite placement"
        assert np.abs(R @ R.T - np.eye(3)).max() < 1e-9, f"{joint.name}: R is not a rotation"
        if joint.type is not JointType.FREE_FLYER:
            assert abs(np.linalg.norm(joint.axis) - 1.0) < 1e-12, f"{joint.name}: axis not unit"
    for body in model.bodies:
        I = body.inertia
        assert math.isfinite(I.mass) and I.mass >= 0.0, f"{body.name}: mass {I.mass}"
        assert np.isfinite(I.com).all() and np.isfinite(I.inertia_com).all()
        scale = max(1.0, float(np.abs(I.inertia_com).max()))
        smallest = float(np.linalg.eigvalsh(I.inertia_com).min())
        assert smallest >= -1e-9 * scale, f"{body.name}: inertia moment {smallest}"
    if dynamics and model.nv <= 64:  # the oracle is per body in Python: keep it quick
        from grid_rbd.reference.robot import ReferenceRobot

        robot = ReferenceRobot(model)
        rng = np.random.default_rng(0)
        q = rng.uniform(-1, 1, (1, model.nq))
        if model.floating_base:
            q[0, 3:7] /= np.linalg.norm(q[0, 3:7])
        qd = rng.uniform(-1, 1, (1, model.nv))
        tau = robot.inverse_dynamics(q, qd, qd)
        M = robot.crba(q)
        assert np.isfinite(tau).all(), "inverse dynamics is not finite"
        assert np.isfinite(M).all() and np.allclose(M, np.swapaxes(M, 1, 2), atol=1e-9 * max(
            1.0, float(np.abs(M).max()))), "the mass matrix is not finite and symmetric"


@dataclass
class Summary:
    cases: int = 0
    outcomes: Counter = field(default_factory=Counter)
    crashes: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return {"cases": self.cases, "outcomes": dict(self.outcomes),
                "crashes": len(self.crashes), "crash_details": self.crashes[:20],
                "seconds": round(self.seconds, 2)}


def run_case(data: bytes, floating_base: bool, dynamics: bool, limit: float = 20.0) -> str:
    """Parse one document; "model" or "urdf_error", else raise (a crash)."""
    from grid_codegen import URDFError, parse_urdf

    with time_limit(limit):
        try:
            model = parse_urdf(data, floating_base=floating_base)
        except URDFError as exc:
            assert str(exc).startswith("<urdf string>"), f"an error without its source: {exc}"
            return "urdf_error"
        check_model(model, dynamics)
    return "model"


def fuzz(seed: int, cases: int | None = None, seconds: float | None = None,
         dynamics_every: int = 4, summary: Summary | None = None) -> Summary:
    """Run `cases` cases (or as many as fit in `seconds`) from `seed`; a `Summary`."""
    import logging

    quiet = logging.getLogger("grid_codegen")  # mimic and clamp notices, by the thousand
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        return _fuzz(seed, cases, seconds, dynamics_every, summary or Summary())
    finally:
        quiet.setLevel(level)


def _fuzz(seed: int, cases: int | None, seconds: float | None, dynamics_every: int,
          summary: Summary) -> Summary:
    documents = seeds()
    rng = random.Random(seed)
    start = time.monotonic()
    k = 0
    while (cases is None or k < cases) and (seconds is None
                                            or time.monotonic() - start < seconds):
        source = documents[rng.randrange(len(documents))]
        data, steps = mutate(source.data, rng)
        floating = source.floating_base if rng.random() < 0.8 else not source.floating_base
        try:
            outcome = run_case(data, floating, dynamics=k % dynamics_every == 0)
        except Exception as exc:  # noqa: BLE001 - every other outcome is the finding
            outcome = "crash"
            summary.crashes.append({"seed": seed, "case": k, "robot": source.name,
                                    "floating_base": floating, "mutations": steps,
                                    "error": f"{type(exc).__name__}: {exc}"[:400],
                                    "where": traceback.format_exc(limit=-3)[-800:]})
        summary.outcomes[outcome] += 1
        summary.cases += 1
        k += 1
    summary.seconds += time.monotonic() - start
    return summary
