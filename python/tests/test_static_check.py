"""Static DSL-use check: every rule with a positive and a negative case, per DSL, and the string
tricks that try to hide a forbidden use (aliases, computed names, module patching)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mkb_eval.static_check import check_source, iter_rules

FIXTURES = Path(__file__).parent / "fixtures"

CUTE_BASE = '''
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch


@cute.kernel
def k(gX: cute.Tensor, gY: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    gY[tidx] = gX[tidx]


@cute.jit
def host(mX: cute.Tensor, mY: cute.Tensor, stream: cuda.CUstream):
    k(mX, mY).launch(grid=[1, 1, 1], block=[32, 1, 1], stream=stream)


def build(spec):
    fn = cute.compile(host, None, None, None)

    def run(x, y):
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        fn(x, y, stream)
{extra_run}
    return run
{extra_top}
'''

TIRX_BASE = '''
import torch
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target


@T.function
def copy(X: T.Tensor((128,), T.float32), Y: T.Tensor((128,), T.float32)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    i = T.cuda.thread_idx("x")
    Y[i] = X[i]


def build(spec):
    ex = tvm_tirx.tirx.compile(copy, target=Target({{"kind": "cuda", "arch": "sm_90a"}}))
    f = ex["copy"]

    def run(x, y):
        f(x, y)
{extra_run}
    return run
{extra_top}
'''


def src(dsl: str, run: str = "", top: str = "") -> str:
    base = CUTE_BASE if dsl == "cute" else TIRX_BASE
    return base.format(extra_run=textwrap.indent(textwrap.dedent(run), " " * 8) if run else "",
                       extra_top=textwrap.dedent(top))


def rules(source: str, dsl: str = "cute") -> set[str]:
    return {v.rule for v in check_source(source, dsl)}


@pytest.mark.parametrize("dsl", ["cute", "tirx"])
def test_clean_candidates_pass(dsl: str) -> None:
    assert check_source(src(dsl), dsl) == []
    assert check_source((FIXTURES / f"a01_{dsl}_ok.py").read_text(), dsl) == []


def test_rule_codes_and_lines() -> None:
    v = check_source(src("cute", top="import os\n"), "cute")
    assert [x.code for x in v] == ["static:forbidden_import"]
    assert v[0].line == src("cute", top="import os\n").splitlines().index("import os") + 1
    assert "line" in str(v[0]) and "static:forbidden_import" in str(v[0])
    assert set(iter_rules()) >= {x.rule for x in v}


# -- what a candidate must have ------------------------------------------------------------------

def test_missing_pieces_cute() -> None:
    starter = (Path(__file__).parents[2] / "problems/A/A01_bias_gelu/cute/starter.py").read_text()
    assert rules(starter, "cute") == {"missing_dsl_kernel", "missing_dsl_compile"}
    no_build = src("cute").replace("def build(spec):", "def make(spec):")
    assert rules(no_build, "cute") == {"missing_build"}
    nested_build = "def outer():\n    def build(spec):\n        pass\n" + no_build
    assert "missing_build" in rules(nested_build, "cute")
    no_import = "import torch\n\ndef build(spec):\n    return None\n"
    assert rules(no_import, "cute") >= {"missing_dsl_import", "missing_dsl_kernel", "missing_dsl_compile"}
    # A kernel decorated with something that is not the DSL's does not count.
    fake = src("cute").replace("@cute.kernel", "@staticmethod").replace("@cute.jit", "@staticmethod")
    assert "missing_dsl_kernel" in rules(fake, "cute")


def test_missing_pieces_tirx() -> None:
    starter = (Path(__file__).parents[2] / "problems/A/A01_bias_gelu/tirx/starter.py").read_text()
    assert rules(starter, "tirx") == {"missing_dsl_kernel", "missing_dsl_compile"}
    assert rules(src("tirx").replace("@T.function", "@T.prim_func"), "tirx") == set()
    assert rules(src("tirx").replace("tvm_tirx.tirx.compile(", "tvm_tirx.compile("), "tirx") == {"missing_dsl_compile"}
    via_from = src("tirx").replace("tvm_tirx.tirx.compile(", "tcompile(").replace(
        "import tvm_tirx\n", "import tvm_tirx\nfrom tvm_tirx.tirx import compile as tcompile\n")
    assert rules(via_from, "tirx") == set()


def test_wrong_dsl_is_rejected() -> None:
    # A CuTe file submitted as TIRx and vice versa: missing pieces plus the other DSL's import.
    assert {"missing_dsl_import", "forbidden_import"} <= rules(src("cute"), "tirx")
    assert {"missing_dsl_import", "forbidden_import"} <= rules(src("tirx"), "cute")


# -- imports --------------------------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "import triton", "import triton as tr", "import triton.language as tl", "from triton import jit",
    "import os", "import os.path", "from os import environ", "import sys", "import subprocess", "import socket",
    "import time", "from time import perf_counter", "import ctypes", "import cffi", "import cupy", "import numba",
    "import pycuda.driver", "from torch.utils import cpp_extension", "from torch.utils.cpp_extension import load_inline",
    "import cuda.core", "from cuda.bindings import nvrtc", "from cuda import core", "import threading",
    "import multiprocessing", "import inspect", "import gc", "import importlib", "import builtins", "import pickle",
    "import io", "import pathlib", "import shutil", "import tempfile", "import signal", "import asyncio",
    "import types", "import weakref", "import mmap", "import resource", "import traceback", "import ast",
    "import dis", "import code", "import runpy", "import atexit", "import marshal", "import http.client",
    "import urllib.request", "import requests", "import concurrent.futures", "import _thread", "import tvm_ffi.cpp",
    "from tvm_tirx.backend.cuda.compiler import compile_source", "from . import helper", "from torch import *",
])
def test_forbidden_imports(line: str) -> None:
    assert "forbidden_import" in rules(src("cute", top=line + "\n"), "cute")


@pytest.mark.parametrize("line", ["import math", "import numpy as np", "import functools", "from typing import Any",
                                  "import cuda.bindings.driver as cuda", "from cutlass.cute.runtime import from_dlpack",
                                  "import dataclasses", "import operator", "import itertools"])
def test_allowed_imports(line: str) -> None:
    assert rules(src("cute", top=line + "\n"), "cute") == set()


def test_other_dsl_is_forbidden() -> None:
    assert "forbidden_import" in rules(src("cute", top="import tvm_tirx\n"), "cute")
    assert "forbidden_import" in rules(src("tirx", top="import cutlass.cute as cute2\n"), "tirx")


# -- builtins and computed names ------------------------------------------------------------------

@pytest.mark.parametrize("code", ["open('/etc/passwd')", "eval('1')", "exec('x = 1')", "compile('1', 'f', 'eval')",
                                  "__import__('os')", "globals()", "locals()", "vars(x)", "breakpoint()", "input()"])
def test_forbidden_builtin_calls(code: str) -> None:
    assert "forbidden_call" in rules(src("cute", run=code + "\n"), "cute")


def test_forbidden_builtins_as_values_and_rebinding() -> None:
    assert "forbidden_call" in rules(src("cute", run="o = open\no('/etc/hosts')\n"), "cute")
    assert "forbidden_call" in rules(src("cute", top="import functools\nf = functools.partial(getattr, 1)\n"), "cute")
    # Rebinding a forbidden builtin at module level could hide a use before it: refused.
    assert "builtin_rebind" in rules(src("cute", top="open = print\n"), "cute")
    # A parameter or a local named like a builtin is just a local name.
    ok = src("cute", top="def helper(input, compile):\n    return input + compile\n")
    assert rules(ok, "cute") == set()
    ok2 = src("cute", top="def helper():\n    vars = 3\n    return vars\n")
    assert rules(ok2, "cute") == set()


def test_getattr_rules() -> None:
    assert "dynamic_attr" in rules(src("cute", run="name = 'mat' + 'mul'\ngetattr(torch, name)(x, y)\n"), "cute")
    assert "dynamic_attr" in rules(src("cute", run="setattr(x, 'a' + 'b', 1)\n"), "cute")
    assert "dynamic_attr" in rules(src("cute", run="delattr(x, str(1))\n"), "cute")
    assert "dynamic_attr" in rules(src("cute", top="import operator\ng = operator.attrgetter('a' + 'b')\n"), "cute")
    assert rules(src("cute", run="n = getattr(x, 'shape')\n"), "cute") == set()
    assert "torch_call" in rules(src("cute", run="getattr(torch, 'matmul')(x, y)\n"), "cute")
    assert "dunder" in rules(src("cute", run="getattr(x, '__class__')\n"), "cute")
    assert "module_patch" in rules(src("cute", run="setattr(torch.cuda, 'Event', object)\n"), "cute")
    assert "forbidden_attr" in rules(src("cute", run="getattr(cutlass, 'os')\n"), "cute")


# -- dunders, introspection, reaching modules through other objects -------------------------------

@pytest.mark.parametrize("code", ["x.__class__", "x.__dict__", "build.__globals__", "build.__code__",
                                  "object.__subclasses__()", "print(__builtins__)", "print(__file__)",
                                  "print(__loader__)"])
def test_dunders(code: str) -> None:
    assert "dunder" in rules(src("cute", run=code + "\n"), "cute")


def test_allowed_dunders() -> None:
    top = "class K:\n    def __init__(self):\n        super().__init__()\n    def __call__(self):\n        return K.__name__\n"
    assert rules(src("cute", top=top + "if __name__ == '__main__':\n    pass\n"), "cute") == set()


@pytest.mark.parametrize("code", ["g = (i for i in []); g.gi_frame.f_back", "e = None\ne.tb_frame", "f.f_globals",
                                  "getattr(g, 'gi_frame')"])
def test_introspection(code: str) -> None:
    assert "introspection" in rules(src("cute", run=code + "\n"), "cute")


@pytest.mark.parametrize("code", ["np.os.environ", "cutlass.torch.ctypes", "x.sys.modules", "cutlass.torch.torch",
                                  "dataclasses.sys"])
def test_sensitive_attributes(code: str) -> None:
    top = "import numpy as np\nimport dataclasses\n"
    assert "forbidden_attr" in rules(src("cute", run=code + "\n", top=top), "cute")


def test_cutlass_torch_helper_is_allowed() -> None:
    assert rules(src("cute", top="import cutlass.torch as ct\nDT = ct.dtype\nM = cutlass.torch\n"), "cute") == set()


# -- patching imported modules ---------------------------------------------------------------------

@pytest.mark.parametrize("code", ["torch.cuda.Event = object", "torch.cuda.synchronize = print", "cute.compile = None",
                                  "c = torch.cuda\nc.Event = object", "tc.Event = object", "del torch.cuda.Event",
                                  "torch.Tensor.add = None", "cutlass.Float32 += 1"])
def test_module_patch(code: str) -> None:
    assert "module_patch" in rules(src("cute", run=code + "\n", top="import torch.cuda as tc\n"), "cute")


def test_attribute_assignment_on_own_objects_is_fine() -> None:
    top = "class S:\n    pass\n\ns = S()\ns.x = 1\n\ndef f(spec):\n    spec.cache = {}\n"
    assert rules(src("cute", top=top), "cute") == set()


# -- PyTorch --------------------------------------------------------------------------------------

@pytest.mark.parametrize("code", [
    "torch.matmul(x, y)", "torch.nn.functional.gelu(x)", "torch.softmax(x, -1)", "torch.zeros(4)",
    "torch.compile(build)", "torch.ops.aten.add(x, y)", "torch.cuda.synchronize()", "torch.randn(3)",
    "F = torch.nn.functional\nF.gelu(x)", "g = torch.nn.functional.gelu\ng(x)", "h = torch\nh.exp(x)",
    "print(torch)", "torch.Tensor.add(x, y)", "torch.cuda._sleep(10)",
])
def test_torch_compute(code: str) -> None:
    assert "torch_call" in rules(src("cute", run=code + "\n"), "cute")


@pytest.mark.parametrize("top,code", [
    ("import torch.nn.functional as F\n", "F.gelu(x)"),
    ("from torch.nn import functional\n", "functional.gelu(x)"),
    ("from torch.nn import functional as fnl\n", "fnl.softmax(x, -1)"),
    ("from torch import matmul\n", "matmul(x, y)"),
    ("from torch import matmul as mm\n", "mm(x, y)"),
])
def test_torch_compute_through_aliases(top: str, code: str) -> None:
    assert "torch_call" in rules(src("cute", run=code + "\n", top=top), "cute")


@pytest.mark.parametrize("code", ["torch.cuda.Stream()", "torch.cuda.stream(None)", "torch.cuda.graph(None)",
                                  "torch.cuda.CUDAGraph()", "torch.cuda.Event()", "s = torch.cuda.Stream",
                                  "torch.cuda.set_stream(None)"])
def test_torch_streams(code: str) -> None:
    assert "torch_stream" in rules(src("cute", run=code + "\n"), "cute")


def test_torch_allowed_helpers() -> None:
    code = ("a = torch.empty(4, device='cuda', dtype=torch.bfloat16)\nb = torch.empty_like(a)\n"
            "c = torch.empty_strided((2,), (1,))\nd = torch.cuda.current_stream().cuda_stream\n"
            "e = torch.cuda.current_device()\np = torch.cuda.get_device_properties(0)\n"
            "ok = torch.cuda.is_available()\nf = torch.finfo(torch.float32).max\ng = torch.iinfo(torch.int32)\n"
            "h = torch.Size([1])\ndev = torch.device('cuda')\nassert isinstance(x, torch.Tensor)\n"
            "cs = torch.cuda.current_stream\ns2 = cs()\nn = torch.bfloat16.itemsize\n"
            "fp = torch.float32.is_floating_point\n")
    assert rules(src("cute", run=code), "cute") == set()
    # A local parameter named like an import alias shadows it.
    assert rules(src("cute", top="def helper(torch):\n    return torch.matmul(1, 2)\n"), "cute") == set()


def test_local_imports_are_resolved() -> None:
    code = "import torch.nn.functional as G\nG.gelu(x)\n"
    assert "torch_call" in rules(src("cute", run=code), "cute")


# -- CUDA/PTX source strings ------------------------------------------------------------------------

@pytest.mark.parametrize("code", ['s = "extern \\"C\\" __global__ void k() {}"', 's = ".visible .entry k()"',
                                  's = "__glo" + "bal__ void k() {}"', 's = f"__global__ void {1}()"'])
def test_cuda_source_strings(code: str) -> None:
    assert "cuda_source" in rules(src("cute", run=code + "\n"), "cute")


def test_docstrings_and_tirx_snippets_are_fine() -> None:
    doc = src("cute").replace("def build(spec):\n", 'def build(spec):\n    """Launches a __global__ kernel."""\n')
    assert rules(doc, "cute") == set()
    snippet = src("tirx", top='FENCE = "__forceinline__ __device__ void fence(float& r) { asm volatile(\\"\\" : \\"+f\\"(r)); }"\n')
    assert rules(snippet, "tirx") == set()


def test_syntax_error() -> None:
    v = check_source("def build(:\n", "cute")
    assert [x.rule for x in v] == ["syntax_error"] and v[0].line == 1


def test_pathological_nesting_is_a_parse_error_not_a_crash() -> None:
    deep = "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    assert [v.rule for v in check_source(deep, "cute")] == ["syntax_error"]
