"""The DSL descriptors drive the evaluator: dsls/<name>/dsl.toml is read as mkb reads it, the static
check's per-DSL rules come from it (a third DSL, the dummy fixture of tests/dsls/dummy, is checked by
its own rules and forbidden in the others), and a runner's environment, PYTHONPATH, sandbox reads and
adapter module come from its DSL's descriptor."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from mkb_eval import adapters
from mkb_eval.adapters import DescriptorError, descriptors, load_descriptor
from mkb_eval.sandbox import EXTRA_READ_ENV, runner_env
from mkb_eval.static_check import check_source, dsl_rules

REPO = Path(__file__).resolve().parents[2]
DUMMY = REPO / "tests" / "dsls" / "dummy"


@pytest.fixture
def with_dummy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A dsls/ folder with cute, tirx and the dummy fixture, made the registered one."""
    dsls = tmp_path / "dsls"
    for name in ("cute", "tirx"):
        (dsls / name).mkdir(parents=True)
        text = (REPO / "dsls" / name / "dsl.toml").read_text()
        (dsls / name / "dsl.toml").write_text(text.replace("../../docs/dsl/", str(REPO / "docs" / "dsl") + "/"))
    shutil.copytree(DUMMY, dsls / "dummy", ignore=shutil.ignore_patterns("starter.py", "solution.py"))
    monkeypatch.setenv(adapters.DSLS_DIR_ENV, str(dsls))
    return dsls


def test_the_repository_registers_cute_and_tirx() -> None:
    reg = descriptors(str(REPO / "dsls"))
    assert sorted(reg) == ["cute", "tirx"]
    cute, tirx = reg["cute"], reg["tirx"]
    assert cute.display_name == "CuTe DSL" and cute.adapter == "mkb_eval.adapters.cute"
    assert cute.owned_modules == ("cutlass",)  # defaults to roots
    assert tirx.owned_modules == ("tvm_tirx", "tvm")
    # The decorator and compile patterns of the old hand-written table.
    assert cute.is_kernel_decorator("cutlass.cute.kernel") and not cute.is_kernel_decorator("cutlass.cute.foo")
    assert tirx.is_kernel_decorator("tvm_tirx.script.tirx.prim_func") and tirx.is_kernel_decorator("tvm_tirx.jit")
    assert not tirx.is_kernel_decorator("tvm_tirx.my_function") and not tirx.is_kernel_decorator("other.jit")
    assert tirx.is_compile_call("tvm_tirx.tirx._compile.compile")
    assert cute.runner_env == {"CUTE_DSL_CACHE_DIR": "{scratch}/cache/cute"}


def test_rules_come_from_the_descriptors() -> None:
    reg = descriptors(str(REPO / "dsls"))
    r = dsl_rules("tirx", reg)
    assert r.roots == ("tvm_tirx",) and r.other == ("cutlass",) and r.display == "TIRx"
    assert dsl_rules("cute", reg).other == ("tvm_tirx", "tvm")
    with pytest.raises(KeyError, match="registered: cute, tirx"):
        dsl_rules("triton", reg)


def test_bad_descriptors_name_the_file_and_the_field(tmp_path: Path) -> None:
    good = (DUMMY / "dsl.toml").read_text()
    cases = [
        (good.replace('name = "dummy"', 'name = "other"'), "`name`"),
        (good.replace('adapter = "mkb_dummy_dsl.adapter"', 'adapter = "not a module"'), "`python.adapter`"),
        (good.replace('roots = ["mkb_dummy_dsl"]', "roots = []"), "`static.roots`"),
        (good.replace('compile_text = "dummy.compile(...)"', "compile_text = 3"), "`static.compile_text`"),
        (good.replace('kernel_text = "@dummy.kernel"\n', ""), "`static.kernel_text`"),
        (good.replace("[python]", "[python\n"), "dsl.toml"),
    ]
    for text, field in cases:
        d = tmp_path / "dummy"
        d.mkdir(exist_ok=True)
        (d / "dsl.toml").write_text(text)
        with pytest.raises(DescriptorError) as e:
            load_descriptor(str(d / "dsl.toml"))
        assert str(d / "dsl.toml") in str(e.value) and field in str(e.value), str(e.value)


def test_a_third_dsl_is_checked_by_its_own_rules(with_dummy: Path) -> None:
    assert sorted(descriptors()) == ["cute", "dummy", "tirx"]
    solution = (DUMMY / "solution.py").read_text()
    assert check_source(solution, "dummy") == []
    starter = (DUMMY / "starter.py").read_text()
    rules = {v.rule for v in check_source(starter, "dummy")}
    assert rules == {"missing_dsl_kernel", "missing_dsl_compile"}, rules
    msg = " ".join(str(v) for v in check_source(starter, "dummy"))
    assert "Dummy DSL" in msg and "@dummy.kernel" in msg
    # The dummy DSL's module is another DSL's in a cute variant, and cute's in a dummy one.
    cute_ok = (REPO / "python" / "tests" / "fixtures" / "a01_cute_ok.py").read_text()
    assert check_source(cute_ok, "cute") == []
    bad = {(v.rule, v.message.split(":")[0]) for v in check_source(cute_ok + "\nimport mkb_dummy_dsl\n", "cute")}
    assert ("forbidden_import", "imports 'mkb_dummy_dsl'") in bad, bad
    mixed = [v.rule for v in check_source("import cutlass\n" + solution, "dummy")]
    assert mixed == ["forbidden_import"], mixed


def test_a_runner_gets_its_dsls_environment(with_dummy: Path, tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin", "MKB_DUMMY_DSL_LEVEL": "3", "CUTE_DSL_ARCH": "sm_90a", "OPENAI_API_KEY": "sk-x"}
    scratch = str(tmp_path / "scratch")
    env = runner_env(base, scratch, ["/pkg"], dsl="dummy")
    assert env["PYTHONPATH"].split(os.pathsep)[:2] == [str(with_dummy / "dummy" / "python"), "/pkg"]
    assert env["MKB_DUMMY_DSL_CACHE"] == f"{scratch}/cache/dummy"
    assert env["MKB_DUMMY_DSL_LEVEL"] == "3" and env["CUTE_DSL_ARCH"] == "sm_90a"  # registered prefixes pass
    assert "OPENAI_API_KEY" not in env and "CUTE_DSL_CACHE_DIR" not in env
    assert env[adapters.ADAPTER_ENV] == "dummy=mkb_dummy_dsl.adapter"
    cute = runner_env(base, scratch, ["/pkg"], dsl="cute")
    assert cute["CUTE_DSL_CACHE_DIR"] == f"{scratch}/cache/cute" and "MKB_DUMMY_DSL_CACHE" not in cute
    assert EXTRA_READ_ENV not in cute


def test_the_adapter_is_found_from_the_descriptor_or_the_runner_env(with_dummy: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert adapters.adapter_module("dummy") == "mkb_dummy_dsl.adapter"
    assert adapters.probe("dummy")["available"]  # found on the descriptor's python.path
    monkeypatch.setenv(adapters.DSLS_DIR_ENV, str(with_dummy / "nowhere"))  # a runner cannot read dsls/
    monkeypatch.setenv(adapters.ADAPTER_ENV, "dummy=mkb_dummy_dsl.adapter")
    assert adapters.adapter_module("dummy") == "mkb_dummy_dsl.adapter"
    monkeypatch.syspath_prepend(str(DUMMY / "python"))
    adapter = adapters.get_adapter("dummy")
    rec = adapters.KernelRecorder()
    adapter.install_hooks(rec, compile_only=True)
    ns: dict[str, object] = {}
    exec(compile((DUMMY / "solution.py").read_text(), "solution.py", "exec"), ns)  # noqa: S102
    ns["build"](None)  # type: ignore[operator]
    assert rec.names == ["dummy_bias_gelu"]
    sys.modules.pop("mkb_dummy_dsl", None)
    sys.modules.pop("mkb_dummy_dsl.adapter", None)
