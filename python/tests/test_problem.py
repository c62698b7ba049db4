"""problem.toml loading, the Spec, input generation from the secret seed, and output poisoning."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from mkb_eval.problem import (
    Distribution,
    InputGenerator,
    ProblemError,
    TensorDecl,
    allocate,
    fill_input_,
    load_problem,
    make_spec,
    poison_,
    poison_mask,
    resolve_dim,
    spec_from_wire,
    spec_to_wire,
)

PROBLEMS = Path(__file__).parents[2] / "problems"


@pytest.mark.parametrize("rel", ["A/A01_bias_gelu", "C/C01_softmax", "D/D01_gemm"])
def test_load_real_problems(rel: str) -> None:
    p = load_problem(PROBLEMS / rel)
    assert p.benchmark_shape.kind == "benchmark"
    assert len(p.check_shapes) >= 2
    ref = p.load_reference()
    assert callable(ref.reference)
    for e in p.eager:
        assert callable(getattr(ref, e))


def test_a01_spec() -> None:
    p = load_problem(PROBLEMS / "A/A01_bias_gelu")
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
    assert p.outputs[0].tolerance().atol == 1e-2 and p.outputs[0].tolerance().rtol == 2e-2


def test_resolve_dim() -> None:
    assert resolve_dim("2*H", {"H": 7}) == 14
    assert resolve_dim("H/2", {"H": 8}) == 4
    assert resolve_dim("B*H/4", {"B": 2, "H": 8}) == 4
    assert resolve_dim("128", {}) == 128
    with pytest.raises(ProblemError):
        resolve_dim("H/2", {"H": 7})
    with pytest.raises(ProblemError):
        resolve_dim("T", {})


def test_bad_problem_files(tmp_path: Path) -> None:
    good = (PROBLEMS / "A/A01_bias_gelu/problem.toml").read_text()
    (tmp_path / "problem.toml").write_text(good.replace('dtype = "bfloat16"', 'dtype = "bfloat17"', 1))
    with pytest.raises(ProblemError, match="unknown dtype"):
        load_problem(tmp_path)
    (tmp_path / "problem.toml").write_text("surprise = 1\n" + good)
    with pytest.raises(ProblemError, match="unknown fields"):
        load_problem(tmp_path)
    (tmp_path / "problem.toml").write_text(good + "\nsurprise = 1\n")  # lands in the last [[shapes]]
    with pytest.raises(ProblemError, match="unknown fields"):
        load_problem(tmp_path)
    (tmp_path / "problem.toml").write_text(good.replace('kind = "benchmark"', 'kind = "check"'))
    with pytest.raises(ProblemError, match="benchmark"):
        load_problem(tmp_path)
    with pytest.raises(ProblemError, match="std"):
        Distribution.parse({"kind": "normal", "std": 0}, "x")
    with pytest.raises(ProblemError, match="lo < hi"):
        Distribution.parse({"kind": "uniform", "lo": 1, "hi": 1}, "x")


def test_inputs_are_deterministic_per_seed_and_trial() -> None:
    p = load_problem(PROBLEMS / "A/A01_bias_gelu")
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


@pytest.mark.parametrize("rel", ["A/A01_bias_gelu", "C/C01_softmax", "D/D01_gemm"])
def test_declared_bytes_match_the_tensors(rel: str) -> None:
    """These problems read each input once and write each output once: the declared `bytes`
    must equal the sum of the tensor sizes on every shape set."""
    p = load_problem(PROBLEMS / rel)
    for s in p.shapes:
        total = 0
        for t in (*p.inputs, *p.outputs):
            n = torch.empty((), dtype=t.torch_dtype).element_size()
            for d in t.resolve(s.dims):
                n *= d
            total += n
        assert p.min_bytes(s) == total, (rel, s.name)
    assert (p.flop_count(p.benchmark_shape) > 0) == (p.flops is not None)


def test_problem_without_bytes_is_refused(tmp_path: Path) -> None:
    import shutil

    src = PROBLEMS / "A/A01_bias_gelu"
    dst = tmp_path / "A" / "A01_bias_gelu"
    shutil.copytree(src, dst)
    text = (dst / "problem.toml").read_text()
    (dst / "problem.toml").write_text("\n".join(ln for ln in text.splitlines() if not ln.startswith("bytes")))
    with pytest.raises(ProblemError, match=r"problem.toml: field `bytes`: required"):
        load_problem(dst)
    (dst / "problem.toml").write_text(text.replace('bytes = "4*T*H + 2*H"', 'bytes = "4*T*Q"'))
    with pytest.raises(ProblemError, match=r"field `bytes`: dimension Q is not bound"):
        load_problem(dst)
    before = load_problem(src).content_hash()
    (dst / "problem.toml").write_text(text)
    assert load_problem(dst).content_hash() == before
    (dst / "reference.py").write_text((dst / "reference.py").read_text() + "\n# edited\n")
    assert load_problem(dst).content_hash() != before


def test_fill_fast_is_deterministic_per_label() -> None:
    """The timing loop's inputs: regenerated bit-identically from the label, different per label
    and per seed, following the declared distribution."""
    p = load_problem(PROBLEMS / "A/A01_bias_gelu")
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
