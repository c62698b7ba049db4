"""The problem spec from mkb read into a Problem (strictly, errors naming the field) and written back,
the Spec, input generation from the secret seed, and output poisoning."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import BUNDLE, REPO, SPEC_BUNDLE, problem

from mkb_eval.bundle import Bundle, MkbError, mkb_binary
from mkb_eval.problem import (
    Distribution,
    InputGenerator,
    ProblemError,
    TensorDecl,
    allocate,
    fill_input_,
    make_spec,
    poison_,
    poison_mask,
    problem_from_spec,
    problem_to_spec,
    spec_from_wire,
    spec_to_wire,
)

IDS = [str(s["id"]) for s in BUNDLE.problems]


@pytest.mark.parametrize("pid", IDS)
def test_load_real_problems(pid: str) -> None:
    p = problem(pid)
    assert p.benchmark_shape.kind == "benchmark"
    assert len(p.check_shapes) >= 2
    assert p.reference.is_file() and p.dir.is_dir()
    assert p.compile_baseline in p.eager
    ref = p.load_reference()
    assert callable(ref.reference)
    for e in p.eager:
        assert callable(getattr(ref, e))


@pytest.mark.parametrize("pid", IDS)
def test_the_spec_is_written_back_field_for_field(pid: str) -> None:
    """problem_to_spec is the inverse of problem_from_spec (what the contract test relies on)."""
    sent = next(s for s in json.loads(SPEC_BUNDLE.read_text())["problems"] if s["id"] == pid)
    assert problem_to_spec(problem_from_spec(sent, REPO), REPO) == sent


def test_a01_spec() -> None:
    p = problem("A01")
    spec = make_spec(p, p.shape("ragged"))
    assert spec.problem == "A01" and spec.name == "ragged"
    assert dict(spec.dims) == {"T": 333, "H": 1000}
    assert [(t.name, t.shape, t.dtype) for t in spec.inputs] == [("x", (333, 1000), torch.bfloat16),
                                                               ("b", (1000,), torch.bfloat16)]
    assert spec.outputs[0].shape == (333, 1000)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.dims["T"] = 1  # type: ignore[index]
    assert spec_from_wire(spec_to_wire(spec)) == spec
    # The bf16 default tolerance, resolved by mkb (no tolerance table on this side).
    # The bf16 default atol; A01's problem.toml sets rtol 3.2e-2 (one bf16 ulp under a quarter of the bound).
    assert p.outputs[0].tolerance().atol == 1e-2 and p.outputs[0].tolerance().rtol == 3.2e-2


def a01_spec() -> dict[str, Any]:
    return copy.deepcopy(BUNDLE.spec("A01"))


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda d: d.update(colour=1), "`colour` is unknown"),
    (lambda d: d.pop("eager"), "`eager` is missing"),
    (lambda d: d["inputs"][0].update(atol=0.1), "`atol` is unknown"),
    (lambda d: d["outputs"][0].pop("rtol"), "`rtol` is missing"),
    (lambda d: d["shapes"][0].pop("sizes"), "`sizes` is missing"),
    (lambda d: d["inputs"][0].update(dtype="bfloat17"), "unknown dtype"),
    (lambda d: d["inputs"][0]["dist"].update(kind="poisson"), "poisson"),
    (lambda d: d["inputs"][0]["dist"].update(lo=0.0), "`lo` is unknown"),
    (lambda d: d["inputs"][0]["dist"].update(std="one"), "std: expected"),
    (lambda d: d["shapes"][0]["dims"].update(T=True), "got a boolean"),
    (lambda d: d["shapes"][0].update(kind="check"), "benchmark"),
    (lambda d: d["shapes"][1]["sizes"].pop("x"), "sizes"),
])
def test_a_spec_that_breaks_the_protocol_is_refused_by_field(edit: Any, needle: str) -> None:
    d = a01_spec()
    edit(d)
    with pytest.raises(ProblemError, match=needle.replace("`", ".")):
        problem_from_spec(d)


def test_randint_and_uniform_specs() -> None:
    d = a01_spec()
    d["inputs"][0]["dist"] = {"kind": "uniform", "lo": -2.0, "hi": 2, "jitter": False}
    d["inputs"][1]["dtype"] = "int64"
    d["inputs"][1]["dist"] = {"kind": "randint", "lo": 0, "hi": 7}
    p = problem_from_spec(d)
    assert p.inputs[0].dist == Distribution("uniform", lo=-2.0, hi=2.0, jitter=False)
    assert p.inputs[1].dist.kind == "randint" and not p.inputs[1].is_float
    assert problem_to_spec(p)["inputs"][1]["dist"] == {"kind": "randint", "lo": 0, "hi": 7}
    d["inputs"][1]["dist"]["lo"] = 0.5
    with pytest.raises(ProblemError, match="lo: expected int"):
        problem_from_spec(d)


def test_the_fixture_is_what_mkb_prints() -> None:
    """The committed fixture against the mkb binary (the path the Python tools take)."""
    try:
        binary = mkb_binary()
    except MkbError:
        pytest.skip("no mkb binary here (cargo build --release -p mkb-cli)")
    os.environ.setdefault("MKB_BIN", binary)
    live = Bundle.from_mkb(REPO)
    assert dict(live.report) == dict(BUNDLE.report)
    assert set(IDS) <= {s["id"] for s in live.problems}
    for pid in IDS:
        assert live.spec(pid) == BUNDLE.spec(pid), pid
        assert Path(live.spec(pid)["dir"]).is_absolute()


def test_the_bundle_finds_problems_by_any_name() -> None:
    a = BUNDLE.spec("A01")
    assert BUNDLE.spec("bias_gelu") == a == BUNDLE.spec(REPO / "problems" / "A" / "A01_bias_gelu")
    assert BUNDLE.spec("a01_bias_gelu") == a and Path(a["dir"]).is_absolute()
    with pytest.raises(ValueError, match="no problem"):
        BUNDLE.spec("Z99")
    assert BUNDLE.template("bench")["mode"] == "bench"
    assert set(BUNDLE.template("bench")) == set(BUNDLE.report)


def test_inputs_are_deterministic_per_seed_and_trial() -> None:
    p = problem("A01")
    shape = p.shape("small")
    a, b, c, d = (allocate(p.inputs, shape, "cpu") for _ in range(4))
    InputGenerator(p, 42).fill(a, shape, 0)
    InputGenerator(p, 42).fill(b, shape, 0)
    InputGenerator(p, 42).fill(c, shape, 1)
    InputGenerator(p, 43).fill(d, shape, 0)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0]) and not torch.equal(a[0], d[0])
    assert all(bool(t.any()) and bool(torch.isfinite(t.float()).all()) for t in a)


def test_jitter_changes_offset_and_scale_across_trials() -> None:
    decl = TensorDecl("x", "float32", ("N",))
    stats = []
    for seed in range(12):
        t = torch.empty(20000)
        j = fill_input_(t, decl, seed)
        stats.append((float(t.mean()), float(t.std()), j["offset"], j["scale"]))
        assert abs(float(t.mean()) - j["offset"]) < 0.1 * j["scale"] + 0.05
        assert abs(float(t.std()) - j["scale"]) < 0.1 * j["scale"]
    means = [s[0] for s in stats]
    stds = [s[1] for s in stats]
    assert max(means) - min(means) > 0.5 and max(stds) / min(stds) > 1.5
    fixed = TensorDecl("x", "float32", ("N",), Distribution("normal", mean=3.0, std=0.5, jitter=False))
    t = torch.empty(20000)
    assert fill_input_(t, fixed, 5) == {"offset": 0.0, "scale": 1.0}
    assert abs(float(t.mean()) - 3.0) < 0.05 and abs(float(t.std()) - 0.5) < 0.05


def test_uniform_and_randint() -> None:
    u = TensorDecl("u", "float32", ("N",), Distribution("uniform", lo=2.0, hi=4.0, jitter=False))
    t = torch.empty(5000)
    fill_input_(t, u, 1)
    assert float(t.min()) >= 2.0 and float(t.max()) < 4.0
    r = TensorDecl("i", "int64", ("N",), Distribution("randint", lo=3, hi=9))
    ti = torch.empty(5000, dtype=torch.int64)
    fill_input_(ti, r, 1)
    assert int(ti.min()) == 3 and int(ti.max()) == 8


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.int32,
                                   torch.int64, torch.uint8, torch.int8, torch.bool])
def test_poison(dtype: torch.dtype) -> None:
    t = torch.zeros(16, dtype=dtype)
    poison_(t)
    assert bool(poison_mask(t).all())
    if dtype.is_floating_point:
        assert bool(torch.isnan(t).all())
        # A NaN computed by a kernel is not the poison pattern.
        t[3] = float("nan")
        assert not bool(poison_mask(t)[3])
    t[5] = 1 if dtype != torch.bool else True
    assert not bool(poison_mask(t)[5])


@pytest.mark.parametrize("pid", ["A01", "C01", "D01"])
def test_declared_bytes_match_the_tensors(pid: str) -> None:
    """These problems read each input once and write each output once: the declared `bytes`
    must equal the sum of the tensor sizes on every shape set."""
    p = problem(pid)
    for s in p.shapes:
        total = 0
        for t in (*p.inputs, *p.outputs):
            n = torch.empty((), dtype=t.torch_dtype).element_size()
            for d in t.resolve(s):
                n *= d
            total += n
        assert p.min_bytes(s) == total, (pid, s.name)
        assert (p.flop_count(s) > 0) == (pid == "D01")


def test_the_content_hash_follows_problem_toml_and_reference(tmp_path: Path) -> None:
    src = problem("A01")
    dst = tmp_path / "A" / "A01_bias_gelu"
    shutil.copytree(src.dir, dst)
    p = dataclasses.replace(src, dir=dst, reference=dst / "reference.py")
    before = src.content_hash()
    assert p.content_hash() == before
    for name in ("reference.py", "problem.toml"):
        text = (dst / name).read_text()
        (dst / name).write_text(text + "\n# edited\n")
        assert p.content_hash() != before, name
        (dst / name).write_text(text)
        assert p.content_hash() == before, name


def test_fill_fast_is_deterministic_per_label() -> None:
    """The timing loop's inputs: regenerated bit-identically from the label, different per label
    and per seed, following the declared distribution."""
    p = problem("A01")
    s = p.shape("ragged")
    gen = InputGenerator(p, 7)
    a, b, c = (allocate(p.inputs, s, "cpu") for _ in range(3))
    gen.fill_fast(a, s, ("k", 0, 3))
    gen.fill_fast(b, s, ("k", 0, 3))
    gen.fill_fast(c, s, ("k", 0, 4))
    for x, y, z in zip(a, b, c, strict=True):
        assert torch.equal(x.view(torch.int16), y.view(torch.int16))
        assert not torch.equal(x, z)
    other = allocate(p.inputs, s, "cpu")
    InputGenerator(p, 8).fill_fast(other, s, ("k", 0, 3))
    assert not torch.equal(other[0], a[0])
    x = a[0].float()
    assert 0.2 < float(x.std()) < 5.0 and bool(torch.isfinite(x).all())


def test_flops_format_is_optional_checked_and_written_back() -> None:
    from mkb_eval.timing import flop_rate

    d = a01_spec()
    assert problem_from_spec(d).flops_format == "bf16" and "flops_format" not in problem_to_spec(problem_from_spec(d))
    d["flops_format"] = "fp8"
    p = problem_from_spec(d)
    assert p.flops_format == "fp8" and problem_to_spec(p)["flops_format"] == "fp8"
    d["flops_format"] = "fp4"
    with pytest.raises(ProblemError, match="flops_format"):
        problem_from_spec(d)
    # The ideal time's peak: the measured fp8 rate, else twice the bf16 one; bf16 problems use bf16.
    c = {"bandwidth_bytes_per_s": 4e12, "bf16_flops_per_s": 7e14}
    assert flop_rate(c, "bf16") == 7e14 and flop_rate(c, "fp8") == 1.4e15
    assert flop_rate({**c, "fp8_flops_per_s": 1.3e15}, "fp8") == 1.3e15
    assert flop_rate({**c, "fp8_flops_per_s": None}, "fp8") == 1.4e15
