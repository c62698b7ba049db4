"""Reference and eager baselines for F08 int4_weight_gemv:
W[n, k] = (nibble(n, k) - 8) * scales[n, k // 128], nibble(n, 2j) = wq[n, j] & 15,
nibble(n, 2j + 1) = wq[n, j] >> 4; y = x @ W^T (fp32 accumulation, bf16 out)."""
import torch
import torch.nn.functional as F


def _nibbles(wq: torch.Tensor) -> torch.Tensor:
    """The unsigned 4-bit codes as an [N, K] int32 tensor: low nibble = even k, high nibble = odd k."""
    lo = (wq & 0xF).to(torch.int32)
    hi = (wq >> 4).to(torch.int32)
    return torch.stack([lo, hi], dim=-1).reshape(wq.shape[0], 2 * wq.shape[1])


def reference(x: torch.Tensor, wq: torch.Tensor, scales: torch.Tensor, y: torch.Tensor, group_size: int) -> None:
    """Readable reference, destination-passing: unpack, subtract the zero point 8, scale per group,
    all in fp64, one product, one rounding to bf16."""
    w = (_nibbles(wq) - 8).double() * scales.double().repeat_interleave(group_size, dim=1)
    y.copy_(x.double() @ w.t())


def unpack_linear(x: torch.Tensor, wq: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
    """Eager baseline: the unpacked chain: nibbles to bf16 weights (each rounded to bf16), F.linear."""
    q = (_nibbles(wq) - 8).to(x.dtype)
    w = q * scales.repeat_interleave(group_size, dim=1)
    return F.linear(x, w)


# Torch's int4 kernel wants its own weight layout (a tiled int32 tensor made by
# _convert_weight_to_int4pack, whose uint8 input has the even k in the HIGH nibble) and scales with
# zero points as [K / group, N, 2]. The conversion is a one-time weight preparation (done when a model
# is loaded), so it is cached per weight tensor and version: the timed calls on one set of inputs
# run torch's kernel alone; any new weight values (a new tensor or an in-place refill, which bumps
# the version counter) convert again.
_INT4PACK_CACHE: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def _int4pack(wq: torch.Tensor, scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    key = (wq.data_ptr(), wq._version, tuple(wq.shape), scales.data_ptr(), scales._version, str(wq.device))
    hit = _INT4PACK_CACHE.get(key)
    if hit is None:
        _INT4PACK_CACHE.clear()
        if wq.is_cuda:
            swapped = ((wq & 0xF) << 4) | (wq >> 4)  # even k to the high nibble
            packed = torch._convert_weight_to_int4pack(swapped.contiguous(), 8)
        else:
            packed = torch._convert_weight_to_int4pack_for_cpu(_nibbles(wq), 2)
        zeros = torch.zeros_like(scales)
        sz = torch.stack([scales.t(), zeros.t()], dim=-1).contiguous()  # w = (q - 8) * s + 0
        hit = (packed, sz)
        _INT4PACK_CACHE[key] = hit
    return hit


def torch_int4pack(x: torch.Tensor, wq: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
    """Eager baseline: torch's int4 weight-only kernel (tinygemm on CUDA) on its converted weight."""
    packed, sz = _int4pack(wq, scales)
    if x.is_cuda:
        return torch._weight_int4pack_mm(x, packed, group_size, sz)
    return torch._weight_int4pack_mm_for_cpu(x, packed, group_size, sz)
