"""Static DSL-use check (docs/evaluator.md): parses a candidate with `ast` (never runs it) and reports
every rule it breaks, each with a rule code (`static:<rule>`) and a line. Names are resolved through
imports, `import x as y` / `from a import b` aliases and plain `y = x.attr` assignments, per scope,
so `import triton as tr`, `from torch.nn import functional` or `F = torch.nn.functional` do not hide
anything; what string tricks still hide is left to the dynamic check in the runner.

Rules: syntax_error, missing_dsl_import, missing_dsl_kernel, missing_dsl_compile, missing_build,
forbidden_import, forbidden_call, dynamic_attr, dunder, introspection, forbidden_attr,
module_patch, builtin_rebind, torch_call, torch_stream, cuda_source."""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from .adapters import DslDescriptor, descriptors

# ----------------------------------------------------------------------------------------------
# Tables. The per-DSL rules come from the DSL descriptors (dsls/<name>/dsl.toml, [static]).


@dataclass(frozen=True)
class DslRules:
    """What a kernel in one DSL must and must not do, from its descriptor and the others'."""

    display: str
    roots: tuple[str, ...]
    kernel_decorators: tuple[str, ...]
    kernel_text: str
    compile_calls: tuple[str, ...]
    compile_text: str
    other: tuple[str, ...]  # modules owned by every other registered DSL

    def is_kernel(self, dotted: str) -> bool:
        return any(fnmatch.fnmatchcase(dotted, p) for p in self.kernel_decorators)

    def is_compile(self, dotted: str) -> bool:
        return any(fnmatch.fnmatchcase(dotted, p) for p in self.compile_calls)


def dsl_rules(dsl: str, registered: Mapping[str, DslDescriptor] | None = None) -> DslRules:
    """The rules for kernels in `dsl` among the `registered` DSLs (default: dsls/ of the repository)."""
    reg = descriptors() if registered is None else registered
    if dsl not in reg:
        raise KeyError(f"unknown DSL {dsl!r} (registered: {', '.join(reg)})")
    d = reg[dsl]
    other: list[str] = []
    for name, o in reg.items():
        if name != dsl:
            other += [m for m in o.owned_modules if m not in other and _module_matches(m, d.roots) is None]
    return DslRules(display=d.display_name, roots=d.roots, kernel_decorators=d.kernel_decorators,
                    kernel_text=d.kernel_text, compile_calls=d.compile_calls, compile_text=d.compile_text,
                    other=tuple(other))


# Other kernel languages and escape hatches (a module or any submodule of it).
FORBIDDEN_KERNEL_MODULES = (
    "triton", "cupy", "numba", "pycuda", "torch.utils.cpp_extension", "torch._inductor", "torch._dynamo",
    "torch.cuda.jiterator", "torch.compiler", "cuda.core", "cuda.bindings.nvrtc", "cuda.bindings.nvjitlink",
    "cuda.compute", "cuda.cccl", "cuda.cooperative", "cuda.parallel", "cuda.tile", "ctypes", "cffi", "tvm_ffi.cpp",
    "tvm_tirx.backend.cuda.compiler", "tvm_tirx.support", "tilelang", "helion", "jax", "warp", "taichi", "hidet",
    "thunderkittens",
)
# Standard-library modules with process, file, network, threading or introspection powers.
FORBIDDEN_STDLIB = (
    "os", "sys", "subprocess", "socket", "http", "urllib", "requests", "threading", "multiprocessing", "concurrent",
    "asyncio", "signal", "time", "io", "pathlib", "shutil", "tempfile", "inspect", "gc", "importlib", "builtins",
    "pickle", "marshal", "code", "runpy", "atexit", "traceback", "ast", "dis", "types", "weakref", "resource", "mmap",
    "_thread", "_socket", "_posixsubprocess", "posix", "_ctypes", "_io", "_pickle", "_imp", "_multiprocessing",
    "_signal", "faulthandler", "sysconfig", "site", "ssl", "select", "selectors", "pty", "fcntl", "glob", "fileinput",
    "shelve", "dbm", "sqlite3", "zipimport", "linecache", "tracemalloc", "codeop", "pdb", "platform",
)
FORBIDDEN_BUILTINS = frozenset({"open", "eval", "exec", "compile", "__import__", "globals", "locals", "vars",
                                "breakpoint", "input", "getattr", "setattr", "delattr"})
ALLOWED_DUNDERS = frozenset({"__init__", "__call__", "__name__"})
# Attribute names that reach frames, code or globals.
INTROSPECTION_ATTRS = frozenset({"gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "f_back",
                                 "f_globals", "f_locals", "f_builtins", "f_code", "tb_frame", "tb_next",
                                 "co_code", "co_consts", "func_globals"})
# Attribute names that would reach a forbidden module through another module (`np.os`).
SENSITIVE_ATTRS = frozenset({"os", "sys", "subprocess", "socket", "ctypes", "cffi", "builtins", "importlib",
                             "inspect", "gc", "threading", "multiprocessing", "pickle", "marshal", "shutil",
                             "tempfile", "pathlib", "signal", "runpy", "triton", "cupy", "numba", "pycuda",
                             "cpp_extension", "nvrtc", "jiterator", "http", "urllib", "requests", "asyncio",
                             "concurrent", "atexit", "weakref", "mmap", "torch"})

TORCH_ALLOWED_CALLS = frozenset({
    "torch.cuda.current_stream", "torch.cuda.current_device", "torch.cuda.get_device_properties",
    "torch.cuda.is_available", "torch.empty", "torch.empty_like", "torch.empty_strided", "torch.device",
    "torch.Size", "torch.finfo", "torch.iinfo",
})
TORCH_DTYPES = frozenset({
    "float32", "float", "float16", "half", "bfloat16", "float64", "double", "float8_e4m3fn", "float8_e5m2",
    "float8_e4m3fnuz", "float8_e5m2fnuz", "int8", "uint8", "int16", "short", "int32", "int", "int64", "long",
    "bool", "uint16", "uint32", "uint64", "complex64", "complex128",
})
TORCH_ALLOWED_REFS = TORCH_ALLOWED_CALLS | {f"torch.{d}" for d in TORCH_DTYPES} | {
    "torch.Tensor", "torch.dtype", "torch.strided", "torch.contiguous_format", "torch.version.cuda",
    "torch.__version__",
}
TORCH_STREAM_NAMES = ("torch.cuda.Stream", "torch.cuda.stream", "torch.cuda.ExternalStream", "torch.cuda.set_stream",
                      "torch.cuda.graph", "torch.cuda.graphs", "torch.cuda.CUDAGraph", "torch.cuda.make_graphed_callables",
                      "torch.cuda.Event", "torch.Stream", "torch.Event", "torch.cuda.StreamContext", "torch.cuda.streams")

_CUDA_SOURCE_RE = re.compile(r"__global__|\.entry\b")


@dataclass(frozen=True)
class Violation:
    rule: str
    line: int
    message: str

    @property
    def code(self) -> str:
        return f"static:{self.rule}"

    def __str__(self) -> str:
        return f"line {self.line}: [{self.code}] {self.message}"


def _module_matches(name: str, prefixes: Iterable[str]) -> str | None:
    for p in prefixes:
        if name == p or name.startswith(p + "."):
            return p
    return None


# ----------------------------------------------------------------------------------------------
# Scopes: which names a function/class/comprehension binds, and to what.


@dataclass
class Scope:
    node: ast.AST
    kind: str  # module | function | class | comprehension
    parent: Scope | None
    # name -> list of bound values: ("import", dotted) | ("alias", expr) | ("other", None)
    bindings: dict[str, list[tuple[str, object]]] = field(default_factory=dict)
    globals_: set[str] = field(default_factory=set)

    def bind(self, name: str, kind: str, value: object = None) -> None:
        if name in self.globals_ and self.kind != "module":
            root = self
            while root.parent is not None:
                root = root.parent
            root.bind(name, kind, value)
            return
        self.bindings.setdefault(name, []).append((kind, value))


_SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
                ast.DictComp, ast.GeneratorExp)


class _ScopeBuilder(ast.NodeVisitor):
    """Collects bindings per scope; `scope_of[node]` maps every node to its enclosing scope."""

    def __init__(self, tree: ast.Module):
        self.module = Scope(tree, "module", None)
        self.scope_of: dict[ast.AST, Scope] = {}
        self.cur = self.module
        self.visit(tree)

    def generic_visit(self, node: ast.AST) -> None:
        self.scope_of[node] = self.cur
        super().generic_visit(node)

    def _targets(self, t: ast.AST, value: ast.AST | None) -> None:
        if isinstance(t, ast.Name):
            if value is not None and isinstance(value, ast.Name | ast.Attribute):
                self.cur.bind(t.id, "alias", value)
            else:
                self.cur.bind(t.id, "other")
        elif isinstance(t, ast.Tuple | ast.List):
            for e in t.elts:
                self._targets(e, None)
        elif isinstance(t, ast.Starred):
            self._targets(t.value, None)

    def visit_Global(self, node: ast.Global) -> None:
        self.cur.globals_.update(node.names)
        self.generic_visit(node)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.cur.globals_.update(node.names)  # approximate: resolve outside this scope
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.asname:
                self.cur.bind(a.asname, "import", a.name)
            else:
                top = a.name.split(".")[0]
                self.cur.bind(top, "import", top)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        for a in node.names:
            if a.name == "*":
                continue
            self.cur.bind(a.asname or a.name, "import", f"{mod}.{a.name}" if mod else a.name)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._targets(t, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._targets(node.target, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._targets(node.target, None)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        scope = self.cur
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        scope.bind(node.target.id, "other")
        self.generic_visit(node)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._targets(node.target, None)
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self._targets(node.optional_vars, None)
        self.generic_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.cur.bind(node.name, "other")
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            self._targets(t, None)
        self.generic_visit(node)

    def _enter(self, node: ast.AST, kind: str) -> Scope:
        s = Scope(node, kind, self.cur)
        return s

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.scope_of[node] = self.cur
        if not isinstance(node, ast.Lambda):
            self.cur.bind(node.name, "other")
            for d in node.decorator_list:
                self.visit(d)
            if node.returns is not None:
                self.visit(node.returns)
        args = node.args
        for d in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
            self.visit(d)
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if a.annotation is not None:
                self.visit(a.annotation)
        outer = self.cur
        self.cur = self._enter(node, "function")
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if a is not None:
                self.cur.bind(a.arg, "other")
                self.scope_of[a] = self.cur
        body = node.body if isinstance(node.body, list) else [node.body]
        for stmt in body:
            self.visit(stmt)
        self.cur = outer

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function
    visit_Lambda = _visit_function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope_of[node] = self.cur
        self.cur.bind(node.name, "other")
        for d in [*node.decorator_list, *node.bases, *[k.value for k in node.keywords]]:
            self.visit(d)
        outer = self.cur
        self.cur = self._enter(node, "class")
        for stmt in node.body:
            self.visit(stmt)
        self.cur = outer

    def _visit_comp(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> None:
        self.scope_of[node] = self.cur
        self.visit(node.generators[0].iter)  # evaluated in the enclosing scope
        outer = self.cur
        self.cur = self._enter(node, "comprehension")
        for i, g in enumerate(node.generators):
            self._targets(g.target, None)
            self.scope_of[g] = self.cur
            self.visit(g.target)
            if i:
                self.visit(g.iter)
            for c in g.ifs:
                self.visit(c)
        if isinstance(node, ast.DictComp):
            self.visit(node.key)
            self.visit(node.value)
        else:
            self.visit(node.elt)
        self.cur = outer

    visit_ListComp = _visit_comp
    visit_SetComp = _visit_comp
    visit_DictComp = _visit_comp
    visit_GeneratorExp = _visit_comp


# ----------------------------------------------------------------------------------------------
# The checker.


class _Checker:
    def __init__(self, tree: ast.Module, dsl: str, rules: DslRules):
        self.tree = tree
        self.dsl = dsl
        self.rules = rules
        self.scopes = _ScopeBuilder(tree)
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.docstrings: set[ast.AST] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
                first = node.body[0]
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                    self.docstrings.add(first.value)
        self.violations: list[Violation] = []
        self.has_dsl_import = False
        self.has_kernel = False
        self.has_compile = False
        self._seen: set[tuple[str, int, str]] = set()
        self._resolved: dict[int, set[str]] = {}
        self._resolving: set[int] = set()

    def add(self, rule: str, node: ast.AST | int, message: str) -> None:
        line = node if isinstance(node, int) else getattr(node, "lineno", 0)
        key = (rule, line, message)
        if key not in self._seen:
            self._seen.add(key)
            self.violations.append(Violation(rule, line, message))

    # -- name resolution --------------------------------------------------------------------------
    def _lookup(self, name: str, scope: Scope) -> tuple[Scope | None, list[tuple[str, object]]]:
        s: Scope | None = scope
        first = True
        while s is not None:
            if (s.kind != "class" or first) and name in s.bindings and name not in (s.globals_ if s.kind != "module" else ()):
                return s, s.bindings[name]
            first = False
            s = s.parent
        return None, []

    def resolve(self, node: ast.AST, depth: int = 0) -> set[str]:
        """Dotted names an expression may denote (through imports and aliases); empty if unknown."""
        if depth > 20:
            return set()
        if isinstance(node, ast.Name):
            key = id(node)
            if key in self._resolved:
                return self._resolved[key]
            if key in self._resolving:
                return set()
            self._resolving.add(key)
            scope = self.scopes.scope_of.get(node, self.scopes.module)
            found, binds = self._lookup(node.id, scope)
            out: set[str] = set()
            for kind, value in binds:
                if kind == "import":
                    out.add(str(value))
                elif kind == "alias" and isinstance(value, ast.AST):
                    out |= self.resolve(value, depth + 1)
            self._resolving.discard(key)
            self._resolved[key] = out
            return out
        if isinstance(node, ast.Attribute):
            return {f"{b}.{node.attr}" for b in self.resolve(node.value, depth + 1)}
        if isinstance(node, ast.Subscript):
            return self.resolve(node.value, depth + 1)
        return set()

    def is_builtin(self, node: ast.Name) -> bool:
        """The name refers to the builtin (no binding in reach). Module- and class-level rebinding
        of a forbidden builtin is itself a violation (builtin_rebind), so flow order cannot hide one."""
        scope = self.scopes.scope_of.get(node, self.scopes.module)
        found, binds = self._lookup(node.id, scope)
        if found is None:
            return True
        return found.kind in ("module", "class") and not all(k == "import" for k, _ in binds)

    def root_name(self, node: ast.AST) -> ast.Name | None:
        while isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        return node if isinstance(node, ast.Name) else None

    def binds_module_object(self, name: ast.Name) -> bool:
        """The name is bound by an import (or an alias of one) somewhere in reach."""
        scope = self.scopes.scope_of.get(name, self.scopes.module)
        _, binds = self._lookup(name.id, scope)
        return any(k == "import" or (k == "alias" and self.resolve(name)) for k, _ in binds)

    # -- rules ------------------------------------------------------------------------------------
    def check_import_name(self, full: str, node: ast.AST) -> None:
        other = _module_matches(full, self.rules.other)
        if other:
            self.add("forbidden_import", node, f"imports {full!r}: another DSL is not allowed in a "
                     f"{self.rules.display} variant")
            return
        bad = _module_matches(full, FORBIDDEN_KERNEL_MODULES) or _module_matches(full, FORBIDDEN_STDLIB)
        if bad:
            self.add("forbidden_import", node, f"imports {full!r} ({bad!r} is not allowed)")
        if _module_matches(full, self.rules.roots):
            self.has_dsl_import = True

    def visit_imports(self) -> None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    self.check_import_name(a.name, node)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    self.add("forbidden_import", node, "relative imports are not allowed")
                    continue
                mod = node.module or ""
                self.check_import_name(mod, node)
                for a in node.names:
                    if a.name == "*":
                        self.add("forbidden_import", node, f"'from {mod} import *' hides what is used")
                    else:
                        self.check_import_name(f"{mod}.{a.name}", node)

    def torch_names(self, node: ast.AST) -> list[str]:
        return sorted(d for d in self.resolve(node) if d == "torch" or d.startswith("torch."))

    def check_torch_use(self, dotted: str, node: ast.AST, called: bool) -> None:
        parts = dotted.split(".")
        if len(parts) > 2 and parts[1] in TORCH_DTYPES:
            return  # an attribute of a dtype object (torch.bfloat16.itemsize)
        if _module_matches(dotted, TORCH_STREAM_NAMES):
            self.add("torch_stream", node, f"{dotted} is not allowed (no stream, event or graph creation)")
        elif called and dotted not in TORCH_ALLOWED_CALLS:
            self.add("torch_call", node, f"calls {dotted}: only metadata and allocation helpers of torch are allowed")
        elif not called and dotted not in TORCH_ALLOWED_REFS:
            self.add("torch_call", node, f"uses {dotted} as a value: only dtypes and the allowed helpers of torch "
                     "may be referenced")

    def check_call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Name) and f.id in FORBIDDEN_BUILTINS and self.is_builtin(f):
            if f.id in ("getattr", "setattr", "delattr"):
                name_arg = node.args[1] if len(node.args) > 1 else None
                if not (isinstance(name_arg, ast.Constant) and isinstance(name_arg.value, str)):
                    self.add("dynamic_attr", node, f"{f.id}() with a computed attribute name")
                else:
                    attr = name_arg.value
                    if attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS:
                        self.add("dunder", node, f"{f.id}(..., {attr!r}): dunder attributes are not allowed")
                    if attr in INTROSPECTION_ATTRS:
                        self.add("introspection", node, f"{f.id}(..., {attr!r}) inspects frames or code")
                    if attr in SENSITIVE_ATTRS:
                        self.add("forbidden_attr", node, f"{f.id}(..., {attr!r}) reaches a forbidden module")
                    target = node.args[0] if node.args else None
                    if f.id in ("setattr", "delattr") and target is not None and self._module_rooted(target):
                        self.add("module_patch", node, f"{f.id}() on an imported module patches it")
                    if f.id == "getattr" and target is not None:
                        for d in self.torch_names(target):
                            self.check_torch_use(f"{d}.{attr}", node, called=False)
            else:
                self.add("forbidden_call", node, f"{f.id}() is not allowed")
        for d in self.resolve(f):
            if d == "torch" or d.startswith("torch."):
                self.check_torch_use(d, node, called=True)
            if d in ("operator.attrgetter", "operator.methodcaller") and not all(
                    isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args):
                self.add("dynamic_attr", node, f"{d}() with a computed attribute name")
            if self.rules.is_compile(d):
                self.has_compile = True

    def _module_rooted(self, node: ast.AST) -> bool:
        root = self.root_name(node)
        return root is not None and bool(self.resolve(root))

    def check_attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS:
            self.add("dunder", node, f".{attr}: dunder attributes are not allowed")
        if attr in INTROSPECTION_ATTRS:
            self.add("introspection", node, f".{attr} inspects frames or code")
        resolved = self.resolve(node)
        if attr in SENSITIVE_ATTRS and not (attr == "torch" and resolved == {"cutlass.torch"}):
            self.add("forbidden_attr", node, f".{attr} reaches a forbidden module through another object")
        if isinstance(node.ctx, ast.Store | ast.Del) and self._module_rooted(node):
            self.add("module_patch", node, f"assigning to {ast.unparse(node)} patches an imported module")
        parent = self.parent.get(node)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return  # only the outermost attribute of a chain is judged as a value
        if isinstance(parent, ast.Call) and parent.func is node:
            return  # judged by check_call
        if isinstance(parent, ast.Subscript) and isinstance(self.parent.get(parent), ast.Call) and \
                self.parent[parent].func is parent:  # type: ignore[attr-defined]
            return
        if isinstance(node.ctx, ast.Load):
            for d in self.torch_names(node):
                self.check_torch_use(d, node, called=False)

    def check_name(self, node: ast.Name) -> None:
        name = node.id
        if name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDERS and isinstance(node.ctx, ast.Load):
            self.add("dunder", node, f"{name} is not allowed")
        parent = self.parent.get(node)
        if isinstance(node.ctx, ast.Load) and name in FORBIDDEN_BUILTINS and self.is_builtin(node):
            if not (isinstance(parent, ast.Call) and parent.func is node):
                self.add("forbidden_call", node, f"{name} may not be used as a value")
        if isinstance(node.ctx, ast.Store | ast.Del) and name in FORBIDDEN_BUILTINS:
            scope = self.scopes.scope_of.get(node, self.scopes.module)
            if scope.kind in ("module", "class"):
                self.add("builtin_rebind", node, f"rebinding the builtin {name!r} at module or class level")
        if isinstance(node.ctx, ast.Load) and not (isinstance(parent, ast.Attribute) and parent.value is node) \
                and not (isinstance(parent, ast.Call) and parent.func is node):
            for d in self.torch_names(node):
                if d in ("torch",) or not d.startswith("torch."):
                    self.add("torch_call", node, f"the module {d} may not be used as a value")
                else:
                    self.check_torch_use(d, node, called=False)

    def check_string(self, node: ast.Constant) -> None:
        if node in self.docstrings or not isinstance(node.value, str):
            return
        if _CUDA_SOURCE_RE.search(node.value):
            self.add("cuda_source", node, "a string contains CUDA/PTX kernel source (__global__ or .entry)")

    def check_concat(self, node: ast.BinOp) -> None:
        if not isinstance(node.op, ast.Add) or isinstance(self.parent.get(node), ast.BinOp):
            return
        parts: list[str] = []

        def fold(n: ast.AST) -> bool:
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
                return fold(n.left) and fold(n.right)
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                parts.append(n.value)
                return True
            return False

        if fold(node) and _CUDA_SOURCE_RE.search("".join(parts)):
            self.add("cuda_source", node, "concatenated strings form CUDA/PTX kernel source")

    def check_decorators(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        for d in node.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            if any(self.rules.is_kernel(x) for x in self.resolve(target)):
                self.has_kernel = True

    def run(self) -> list[Violation]:
        self.visit_imports()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                self.check_call(node)
            elif isinstance(node, ast.Attribute):
                self.check_attribute(node)
            elif isinstance(node, ast.Name):
                self.check_name(node)
            elif isinstance(node, ast.Constant):
                self.check_string(node)
            elif isinstance(node, ast.BinOp):
                self.check_concat(node)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.check_decorators(node)
        display = self.rules.display
        if not self.has_dsl_import:
            self.add("missing_dsl_import", 1, f"the file does not import {display} "
                     f"({' or '.join(self.rules.roots)})")
        if not self.has_kernel:
            self.add("missing_dsl_kernel", 1, f"no kernel is defined with {display} ({self.rules.kernel_text})")
        if not self.has_compile:
            self.add("missing_dsl_compile", 1, f"the {display} compiler is never called ({self.rules.compile_text})")
        if not any(isinstance(n, ast.FunctionDef) and n.name == "build" for n in self.tree.body):
            self.add("missing_build", 1, "no top-level `def build(spec)`")
        order = {r: i for i, r in enumerate(iter_rules())}
        self.violations.sort(key=lambda v: (v.line, order.get(v.rule, 99)))
        return self.violations


def check_source(source: str, dsl: str, filename: str = "kernel.py",
                 registered: Mapping[str, DslDescriptor] | None = None) -> list[Violation]:
    """All violations of the static DSL-use check for `dsl` (a registered DSL: its descriptor's
    rules, see `dsl_rules`); empty means pass. A file that does not parse yields a single
    `syntax_error` violation."""
    rules = dsl_rules(dsl, registered)
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        return [Violation("syntax_error", e.lineno or 0, f"{e.msg} (line {e.lineno}, column {e.offset})")]
    except ValueError as e:  # null bytes
        return [Violation("syntax_error", 0, str(e))]
    except (RecursionError, MemoryError):
        return [Violation("syntax_error", 0, "the file is nested too deeply to parse")]
    try:
        return _Checker(tree, dsl, rules).run()
    except RecursionError:
        return [Violation("syntax_error", 0, "the file is nested too deeply to check")]


def summarize(violations: list[Violation], limit: int = 12) -> str:
    lines = [str(v) for v in violations[:limit]]
    if len(violations) > limit:
        lines.append(f"... and {len(violations) - limit} more")
    return "static DSL-use check failed:\n" + "\n".join(lines)


def iter_rules() -> Iterator[str]:
    yield from ("syntax_error", "missing_dsl_import", "missing_dsl_kernel", "missing_dsl_compile", "missing_build",
                "forbidden_import", "forbidden_call", "dynamic_attr", "dunder", "introspection", "forbidden_attr",
                "module_patch", "builtin_rebind", "torch_call", "torch_stream", "cuda_source")
