"""Reference and eager baselines for D05 gemm_swiglu:
out = silu(a @ wg^T) * (a @ wu^T), both products accumulated in fp32, the SwiGLU in fp32, one
rounding to bf16.

`reference` is the contract; `linear_silu_mul` and `mm_fp32_silu_mul` are the eager baselines
timed on the GPU; `alt_*` are independent correct formulations and `wrong_*` slips that must fail
([validate] in problem.toml)."""
import torch
import torch.nn.functional as F


def reference(a: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor, out: torch.Tensor) -> None:
    """Readable reference, destination-passing: two fp32 GEMMs, fp32 silu(g) * u, one rounding."""
    g = a.float() @ wg.float().t()
    u = a.float() @ wu.float().t()
    out.copy_(g * torch.sigmoid(g) * u)


def linear_silu_mul(a: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor) -> torch.Tensor:
    """Eager baseline, as Llama's MLP writes it: two nn.Linear calls, SiLU and a product in bf16
    (rounds g, u and silu(g) to bf16 on the way: less precise than the contract, see statement)."""
    return F.silu(F.linear(a, wg)) * F.linear(a, wu)


def mm_fp32_silu_mul(a: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor) -> torch.Tensor:
    """Eager baseline with the contract's precision: fp32 GEMM outputs (torch.mm with out_dtype,
    CUDA only), SwiGLU in fp32, one rounding."""
    g = torch.mm(a, wg.t(), out_dtype=torch.float32)
    u = torch.mm(a, wu.t(), out_dtype=torch.float32)
    return (F.silu(g) * u).to(torch.bfloat16)
