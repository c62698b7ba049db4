"""CUDA buffers shared between the judge and a runner without pickle or torch's own IPC layer.

The judge describes a tensor by a plain JSON object: the CUDA IPC handle of the allocation
that holds it (hex), the byte offset of the tensor's first element from that allocation's base,
its shape, strides (elements), dtype and device (`export`). The runner opens each handle once
(`cuIpcOpenMemHandle`, cached for the runner's life) and wraps base + offset as a torch tensor
through `__cuda_array_interface__` (`open_tensor`). Torch's own CUDA-tensor reductions stopped
working once the runner runs under another uid with a private /dev ("mapping of buffer object
failed"); the driver calls underneath work there. The judge allocates every shared tensor from a
memory pool of its own per candidate, so a mapped allocation never holds judge-private data.

Driver API through ctypes (libcuda.so.1 is what the CUDA runtime itself loads)."""

from __future__ import annotations

import ctypes
from typing import Any

HANDLE_SIZE = 64  # CU_IPC_HANDLE_SIZE
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
DESC_KEYS = ("handle", "offset", "alloc_size", "shape", "strides", "dtype", "device")


class IpcError(RuntimeError):
    """A CUDA driver call for IPC failed, or a descriptor is malformed."""


class CUipcMemHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * HANDLE_SIZE)]


class _Driver:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(CUipcMemHandle), ctypes.c_uint64]
        self.lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), CUipcMemHandle, ctypes.c_uint]
        self.lib.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                                     ctypes.c_uint64]
        self.lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        self.lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(rc, ctypes.byref(name))
            raise IpcError(f"{what} failed: {(name.value or b'?').decode()} ({rc})")

    def require_context(self) -> None:
        ctx = ctypes.c_void_p()
        self.check(self.lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            raise IpcError("no current CUDA context on this thread (initialize torch.cuda first)")


_DRIVER: _Driver | None = None
_OPENED: dict[bytes, int] = {}


def runtime() -> _Driver:
    """The driver entry points (loaded once; the runner loads them before its sandbox closes)."""
    global _DRIVER
    if _DRIVER is None:
        _DRIVER = _Driver()
    return _DRIVER


def export(t: Any) -> dict[str, Any]:
    """Judge side: the JSON descriptor of a CUDA tensor (synchronize before the runner uses it)."""
    import torch

    if not isinstance(t, torch.Tensor) or t.device.type != "cuda":
        raise IpcError(f"only CUDA tensors can be shared, got {type(t).__name__}")
    d = runtime()
    d.require_context()
    ptr = t.data_ptr()
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    handle = CUipcMemHandle()
    if t.numel() == 0 or ptr == 0:
        return {"handle": "", "offset": 0, "alloc_size": 0, "shape": list(t.shape), "strides": list(t.stride()),
                "dtype": str(t.dtype).removeprefix("torch."), "device": t.device.index or 0}
    d.check(d.lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)),
            "cuMemGetAddressRange")
    d.check(d.lib.cuIpcGetMemHandle(ctypes.byref(handle), ctypes.c_uint64(base.value)), "cuIpcGetMemHandle")
    return {"handle": ctypes.string_at(ctypes.addressof(handle), HANDLE_SIZE).hex(), "offset": ptr - base.value, "alloc_size": size.value,
            "shape": list(t.shape), "strides": list(t.stride()), "dtype": str(t.dtype).removeprefix("torch."),
            "device": t.device.index or 0}


def span_bytes(shape: list[int], strides: list[int], element_size: int) -> int:
    """Bytes from the first element to the end of the last one (0 for an empty tensor)."""
    if any(s == 0 for s in shape):
        return 0
    return (1 + sum((s - 1) * st for s, st in zip(shape, strides, strict=True))) * element_size


def validate(desc: Any) -> None:
    """Shape of a descriptor (it comes from the judge, but the check is cheap and makes bugs loud)."""
    if not isinstance(desc, dict) or any(k not in desc for k in DESC_KEYS):
        raise IpcError(f"bad IPC descriptor: {str(desc)[:200]}")
    shape, strides = desc["shape"], desc["strides"]
    if (not isinstance(shape, list) or not isinstance(strides, list) or len(shape) != len(strides)
            or not all(isinstance(x, int) and x >= 0 for x in shape + strides)):
        raise IpcError(f"bad shape/strides in IPC descriptor: {shape} / {strides}")
    if not isinstance(desc["offset"], int) or desc["offset"] < 0:
        raise IpcError("bad offset in IPC descriptor")


class _CudaArray:
    """A minimal __cuda_array_interface__ (v2) exporter for a byte range of device memory."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 2,
                                         "strides": None}


def open_tensor(desc: dict[str, Any]) -> Any:
    """Runner side: the tensor a descriptor names, aliasing the judge's memory."""
    import torch

    validate(desc)
    dtype = getattr(torch, str(desc["dtype"]), None)
    if not isinstance(dtype, torch.dtype):
        raise IpcError(f"unknown dtype {desc['dtype']!r}")
    shape, strides = list(desc["shape"]), list(desc["strides"])
    device = torch.device("cuda", int(desc["device"]))
    nbytes = span_bytes(shape, strides, torch.empty((), dtype=dtype).element_size())
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype, device=device)
    if desc["offset"] + nbytes > int(desc["alloc_size"]):
        raise IpcError(f"IPC descriptor reaches past its allocation ({desc['offset']} + {nbytes} > {desc['alloc_size']})")
    key = bytes.fromhex(desc["handle"])
    if len(key) != HANDLE_SIZE:
        raise IpcError("bad IPC handle length")
    base = _OPENED.get(key)
    if base is None:
        d = runtime()
        with torch.cuda.device(device):
            d.require_context()
            ptr = ctypes.c_uint64()
            handle = CUipcMemHandle()
            ctypes.memmove(ctypes.addressof(handle), key, HANDLE_SIZE)  # bytes, NULs included
            d.check(d.lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), handle, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                    "cuIpcOpenMemHandle")
        base = _OPENED[key] = int(ptr.value)
    raw = torch.as_tensor(_CudaArray(base + int(desc["offset"]), nbytes), device=device)
    return raw.view(dtype).as_strided(shape, strides)
