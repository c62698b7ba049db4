"""Validation formulations of D07 bmm_scale for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    """Correct: fp64 product times alpha (as fp32, widened), one rounding."""
    s = float(torch.tensor(alpha, dtype=torch.float32))
    return (s * (a.double() @ b.double())).to(torch.bfloat16)


def alt_scaled_rows(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    """Correct: alpha applied to a in fp32 (not rounded), then an fp32 einsum, one rounding."""
    s = torch.tensor(alpha, dtype=torch.float32, device=a.device)
    return torch.einsum("zmk,zkn->zmn", a.float() * s, b.float()).to(torch.bfloat16)


def wrong_missing_alpha(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    """Wrong: the scale dropped."""
    return torch.bmm(a.float(), b.float()).to(torch.bfloat16)


def wrong_b_layout(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    """Wrong: reads b's memory as if it were [Z, N, K] (K-major, like a weight), i.e. transposed."""
    z, k, n = b.shape
    return (alpha * torch.bmm(a.float(), b.reshape(z, n, k).transpose(1, 2).float())).to(torch.bfloat16)


def wrong_batch_stride0(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    """Wrong: b's batch stride ignored (every batch uses b[0])."""
    return (alpha * torch.matmul(a.float(), b[0].float())).to(torch.bfloat16)
