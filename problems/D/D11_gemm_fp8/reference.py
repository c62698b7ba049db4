"""Reference and eager baseline for D11 gemm_fp8:
c = (sa * a) @ (sw * w)^T for e4m3 a and w with fp32 per-tensor scales, fp32 accumulation, bf16 out.

`reference` is the contract (it dequantizes in fp32); `scaled_mm` is the eager baseline timed on
the GPU (cuBLAS's fp8 GEMM); `alt_*` are independent correct formulations and `wrong_*` slips that
must fail ([validate] in problem.toml)."""
import torch


def reference(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor, c: torch.Tensor) -> None:
    """Readable reference, destination-passing: dequantize both operands in fp32, fp32 product,
    one rounding to bf16."""
    c.copy_((a.float() * sa) @ (w.float() * sw).t())


def scaled_mm(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Eager baseline: torch._scaled_mm with per-tensor scales (fp8 tensor cores on sm_90, full
    fp32 accumulation: use_fast_accum=False); w.t() is the column-major operand it wants."""
    return torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sw, out_dtype=torch.bfloat16, use_fast_accum=False)
