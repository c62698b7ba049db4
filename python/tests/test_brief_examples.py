"""Checks the DSL briefs (docs/dsl/cute.md, docs/dsl/tirx.md) and their examples without a GPU.

- every example file is quoted verbatim in its brief, and both briefs quote the same examples;
  the Hopper excerpt of section 4 is cut from docs/dsl/examples/hopper/<dsl>_tma_wgmma.py;
- both briefs have the same section structure and a similar length (the benchmark's fairness);
- every example passes the evaluator's static check (mkb_eval.static_check), since agents copy them;
- every example's build(spec) compiles for sm_90a on this machine: CuTe DSL with
  CUTE_DSL_ARCH=sm_90a (its own ptxas), TIRx through tvm_tirx.tirx.compile and then NVRTC on
  the generated CUDA source (TIRx skips NVRTC when no GPU driver is loaded). The PTX must target
  sm_90a and, where an example promises it, use 16-byte global loads (the Hopper kernels: wgmma,
  TMA and mbarrier waits);
- on a machine with a GPU, every example is also run against PyTorch (check_on_gpu.py).

Each DSL compiles in its own subprocess (this file run as a script), as the evaluator does.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "dsl"
EXAMPLES = DOCS / "examples"
DSLS = ("cute", "tirx")
SITE = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
COMPILE_SHAPES = 2  # shape sets per example compiled here (the smallest and a ragged one)


def _load_check_module():
    spec = importlib.util.spec_from_file_location("brief_check_on_gpu", EXAMPLES / "check_on_gpu.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _example_files(dsl: str) -> list[Path]:
    return sorted((EXAMPLES / dsl).glob("*.py"))


def _quoted_blocks(dsl: str) -> dict[str, str]:
    """Map example file name -> the python block that follows the line naming it in the brief."""
    text = (DOCS / f"{dsl}.md").read_text()
    pattern = re.compile(rf"`examples/{dsl}/(\w+\.py)`[^\n]*\n+```python\n(.*?)\n```", re.S)
    blocks: dict[str, str] = {}
    for name, body in pattern.findall(text):
        assert name not in blocks, f"{dsl}.md quotes {name} twice"
        blocks[name] = body + "\n"
    return blocks


# ----------------------------------------------------------------------------------------------
# Brief <-> example files, and the two briefs against each other
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dsl", DSLS)
def test_brief_quotes_every_example_verbatim(dsl: str) -> None:
    files = _example_files(dsl)
    blocks = _quoted_blocks(dsl)
    assert len(files) == 3, f"expected 3 examples for {dsl}, found {[f.name for f in files]}"
    assert sorted(blocks) == [f.name for f in files], "brief and example folder disagree"
    for f in files:
        assert blocks[f.name] == f.read_text(), f"{dsl}.md: the quoted {f.name} drifted from the file"


def test_both_briefs_cover_the_same_examples() -> None:
    assert [f.name for f in _example_files("cute")] == [f.name for f in _example_files("tirx")]
    check = _load_check_module()
    assert sorted(check.CASES) == sorted(f.stem for f in _example_files("cute"))


def _headings(dsl: str) -> list[str]:
    lines = (DOCS / f"{dsl}.md").read_text().splitlines()
    heads, in_code = [], False
    for line in lines:
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("## "):
            heads.append(re.sub(r"\s+", " ", line[3:].strip()))
    return heads


def test_briefs_share_structure_and_similar_length() -> None:
    heads = {dsl: _headings(dsl) for dsl in DSLS}
    assert len(heads["cute"]) >= 7, heads["cute"]
    assert heads["cute"] == heads["tirx"], "the two briefs must have the same ## sections, in order"
    sizes = {dsl: len((DOCS / f"{dsl}.md").read_text().splitlines()) for dsl in DSLS}
    for dsl, n in sizes.items():
        assert 250 <= n <= 460, f"{dsl}.md has {n} lines"
    assert max(sizes.values()) / min(sizes.values()) <= 1.2, sizes
    words = {dsl: len((DOCS / f"{dsl}.md").read_text().split()) for dsl in DSLS}
    assert max(words.values()) / min(words.values()) <= 1.25, words


def _prose_lines(dsl: str) -> list[str]:
    out, in_code = [], False
    for line in (DOCS / f"{dsl}.md").read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code:
            out.append(line)
    return out


def test_brief_does_not_open_with_the_dsl_marker() -> None:
    # prompt.rs adds "# Your DSL: <name>" itself; a brief must not start a new top-level section.
    for dsl in DSLS:
        assert "# Your DSL:" not in (DOCS / f"{dsl}.md").read_text()
        tops = [line for line in _prose_lines(dsl) if line.startswith("# ")]
        assert not tops, f"{dsl}.md: use ## and deeper headings only, found {tops}"


@pytest.mark.parametrize("dsl", DSLS)
def test_hopper_excerpt_is_cut_from_the_checked_kernel(dsl: str) -> None:
    """Every code line of the section-4 excerpt appears in examples/hopper/<dsl>_tma_wgmma.py."""
    text = (DOCS / f"{dsl}.md").read_text()
    m = re.search(rf"Excerpt of `examples/hopper/({dsl}_\w+\.py)`.*?```python\n(.*?)\n```", text, re.S)
    assert m, f"{dsl}.md has no Hopper excerpt"
    source = {line.strip() for line in (EXAMPLES / "hopper" / m.group(1)).read_text().splitlines()}
    code = [line.strip() for line in m.group(2).splitlines() if line.strip()]
    assert len(code) >= 20
    missing = [line for line in code if not line.startswith("#") and line not in source]
    assert not missing, f"excerpt lines not in {m.group(1)}: {missing}"


# ----------------------------------------------------------------------------------------------
# The evaluator's static rules (mkb_eval.static_check), applied to every example file
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dsl", DSLS)
def test_examples_pass_the_static_check(dsl: str) -> None:
    from mkb_eval.static_check import check_source

    files = [*_example_files(dsl), *sorted((EXAMPLES / "hopper").glob(f"{dsl}_*.py"))]
    assert len(files) == 4
    for f in files:
        assert check_source(f.read_text(), dsl) == [], f.name
        other = "tirx" if dsl == "cute" else "cute"
        assert check_source(f.read_text(), other), f"{f.name} also passes as {other}?"


# ----------------------------------------------------------------------------------------------
# Compile every example for sm_90a without a GPU (one subprocess per DSL)
# ----------------------------------------------------------------------------------------------

VECTOR_LOAD = re.compile(r"ld\.global(\.nc)?(\.L\w+::\w+)*\.v4\.(b32|u32|f32)")
VECTOR_STORE = re.compile(r"st\.global\.v4\.(b32|u32|f32)")


def _make_cuda_headers(root: Path) -> Path:
    """A CUDA_PATH for NVRTC: include/ and targets/x86_64-linux/include/ link to the wheel headers."""
    inc = SITE / "nvidia" / "cu13" / "include"
    root.mkdir(parents=True, exist_ok=True)
    (root / "targets" / "x86_64-linux").mkdir(parents=True, exist_ok=True)
    for link in (root / "include", root / "targets" / "x86_64-linux" / "include"):
        if not link.exists():
            link.symlink_to(inc)
    return root


def _worker(dsl: str, out_dir: Path) -> list[dict]:
    """Runs in the subprocess: build every example for its first COMPILE_SHAPES shape sets."""
    import torch  # noqa: F401  (first: TIRx's CUDA runtime library loads through it)

    check = _load_check_module()
    results: list[dict] = []
    if dsl == "tirx":
        import tvm_tirx
        from tvm_tirx.backend.cuda.compiler import compile_source
        from tvm_tirx.target import Target

        captured: list = []
        real_compile = tvm_tirx.tirx.compile

        def recording_compile(*args, **kwargs):
            ex = real_compile(*args, **kwargs)
            captured.append(ex)
            return ex

        tvm_tirx.tirx.compile = recording_compile
    for name, case in {**check.CASES, **check.HOPPER_CASES}.items():
        module = check.load_example(dsl, name)
        for shape_name, dims, dtype in case.shapes[:COMPILE_SHAPES]:
            row: dict = {"example": name, "shape": shape_name, "vector": case.vector}
            spec = check.make_spec(case, shape_name, dims, dtype)
            try:
                if dsl == "cute":
                    before = set(out_dir.glob("*.ptx"))
                    run = module.build(spec)
                    ptx_files = sorted(set(out_dir.glob("*.ptx")) - before)
                    row["kernels"] = list(run.kernel_info)
                    row["ptx"] = "\n".join(p.read_text() for p in ptx_files)
                    row["cubin"] = bool(list(out_dir.glob("*.cubin")))
                else:
                    captured.clear()
                    run = module.build(spec)
                    assert len(captured) == 1, f"{len(captured)} compiles in one build"
                    src = captured[0].mod.imports[0].inspect_source()
                    target = Target({"kind": "cuda", "arch": "sm_90a"})
                    ptx = compile_source(src, {"cuda": {"target_format": "ptx"}}, target=target).binary
                    cubin = compile_source(src, {"cuda": {"target_format": "cubin"}}, target=target).binary
                    row["kernels"] = sorted(
                        set(re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(", src))
                    )
                    row["ptx"] = bytes(ptx).decode("utf-8", "replace")
                    row["cubin"] = len(cubin) > 0
                row["callable"] = callable(run)
                row["ok"] = True
            except Exception as e:  # reported by the test, with the compiler's message
                row["ok"] = False
                row["error"] = f"{type(e).__name__}: {e}"[-3000:]
            results.append(row)
    return results


@pytest.fixture(scope="module", params=DSLS)
def compiled(request, tmp_path_factory) -> tuple[str, list[dict]]:
    dsl = request.param
    needed = {"cute": "cutlass", "tirx": "tvm_tirx"}[dsl]
    if importlib.util.find_spec(needed) is None:
        pytest.skip(f"{needed} is not installed")
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed")
    work = tmp_path_factory.mktemp(f"compile_{dsl}")
    env = dict(os.environ)
    env.update({"CUTE_DSL_ARCH": "sm_90a", "CUTE_DSL_KEEP": "ptx,cubin", "CUTE_DSL_DUMP_DIR": str(work)})
    if dsl == "tirx" and "CUDA_PATH" not in env:
        env["CUDA_PATH"] = str(_make_cuda_headers(work / "cuda-headers"))
    out = work / "results.json"
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", dsl, str(work), str(out)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0 and out.exists(), proc.stderr[-4000:]
    return dsl, json.loads(out.read_text())


def test_examples_compile_for_sm90a(compiled) -> None:
    dsl, results = compiled
    check = _load_check_module()
    assert len(results) == (len(check.CASES) + len(check.HOPPER_CASES)) * COMPILE_SHAPES
    failures = [f"{r['example']}[{r['shape']}]: {r.get('error')}" for r in results if not r["ok"]]
    assert not failures, "\n".join(failures)
    for r in results:
        where = f"{dsl} {r['example']}[{r['shape']}]"
        assert r["callable"], f"{where}: build() did not return a callable"
        assert r["cubin"], f"{where}: no cubin"
        assert len(r["kernels"]) == 1, f"{where}: kernels {r['kernels']}"
        assert ".target sm_90a" in r["ptx"], f"{where}: PTX does not target sm_90a"
        if r["vector"]:
            assert VECTOR_LOAD.search(r["ptx"]), f"{where}: no 16-byte global load in the PTX"
        if r["example"] == "col_affine":
            assert VECTOR_STORE.search(r["ptx"]), f"{where}: no 16-byte global store in the PTX"
        if r["example"] == "box_blur":
            assert "bar.sync" in r["ptx"] and "ld.shared" in r["ptx"], f"{where}: no shared-memory tile"
        if r["example"] == "tma_wgmma":
            for needle in (
                "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
                "cp.async.bulk.tensor.2d.shared::cta.global",
                "mbarrier.try_wait",
            ):
                assert needle in r["ptx"], f"{where}: no {needle} in the PTX"


# ----------------------------------------------------------------------------------------------
# Numerics against PyTorch: only where a GPU is present (the lead runs check_on_gpu.py on the H200)
# ----------------------------------------------------------------------------------------------


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(not _has_gpu(), reason="needs a CUDA GPU; run docs/dsl/examples/check_on_gpu.py there")
@pytest.mark.parametrize("dsl", DSLS)
def test_examples_match_torch_on_gpu(dsl: str, tmp_path: Path) -> None:
    out = tmp_path / "gpu.json"
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "check_on_gpu.py"), "--dsl", dsl, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        res = _worker(sys.argv[2], Path(sys.argv[3]))
        Path(sys.argv[4]).write_text(json.dumps(res))
    else:
        sys.exit(f"usage: {sys.argv[0]} --worker DSL WORK_DIR OUT_JSON (pytest runs the tests)")
