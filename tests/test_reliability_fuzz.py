"""The URDF fuzzer (issue 12), the bounded CI part of tools/reliability: mutations of the
test set's real URDFs (bytes, attributes, structure). Every outcome must be a model whose
invariants hold or a URDFError naming its source; never another exception or a hang.
Seeded, so a failure reproduces from its seed and case number
(`tools/reliability/run.py --seed S` runs the same cases for longer)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))

from reliability import fuzz  # noqa: E402

SEED = 20261201


def test_mutated_urdfs_are_models_or_urdf_errors():
    summary = fuzz.fuzz(SEED, cases=500)
    report = summary.as_dict()
    assert report["crashes"] == 0, report["crash_details"]
    assert report["cases"] == 500
    # Both outcomes occur: the mutations reach deep into valid models, not only XML errors.
    assert report["outcomes"].get("model", 0) >= 80, report
    assert report["outcomes"].get("urdf_error", 0) >= 80, report


def test_the_fuzzer_is_deterministic():
    documents = fuzz.seeds()
    first, second = random.Random(7), random.Random(7)
    for _ in range(25):
        a = fuzz.mutate(documents[first.randrange(len(documents))].data, first)
        b = fuzz.mutate(documents[second.randrange(len(documents))].data, second)
        assert a == b


def test_a_crash_is_reported_not_hidden(monkeypatch):
    """The oracle has teeth: a parser that raised anything but URDFError is a crash."""
    import grid_codegen

    def broken(*args, **kwargs):
        raise IndexError("boom")

    monkeypatch.setattr(grid_codegen, "parse_urdf", broken)
    report = fuzz.fuzz(1, cases=3).as_dict()
    assert report["crashes"] == 3 and "IndexError: boom" in report["crash_details"][0]["error"]


def test_a_hang_is_a_crash():
    with pytest.raises(fuzz.Hang):
        with fuzz.time_limit(0.2):
            while True:
                pass


def test_model_invariants_catch_a_non_unit_axis():
    """`check_model` refuses what the old parser produced for `1e200 0 0` (a zero axis)."""
    import dataclasses

    import numpy as np

    from grid_codegen import parse_urdf

    model = parse_urdf(REPO / "robots/iiwa14/iiwa14.urdf")
    broken = dataclasses.replace(model, joints=(
        dataclasses.replace(model.joints[0], axis=np.zeros(3)), *model.joints[1:]))
    with pytest.raises(AssertionError, match="axis not unit"):
        fuzz.check_model(broken, dynamics=False)
    fuzz.check_model(model, dynamics=True)
