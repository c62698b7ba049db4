"""Validation formulations of B02 add_rmsnorm for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor,
             eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """fp64 chain of ops on the rounded residual, dividing by the root."""
    r_new = (x.double() + r.double()).to(x.dtype)
    h = r_new.double()
    rms = torch.sqrt((h * h).sum(dim=-1, keepdim=True) / x.shape[-1] + eps)
    return (h / rms * w.double()).to(x.dtype), r_new


def alt_chunked_fp32(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor,
                     eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32, sum of squares in column blocks of 512 added in a second step, weight first."""
    r_new = (r.float() + x.float()).to(x.dtype)
    h = r_new.float()
    n = h.shape[-1]
    ss = torch.stack([h[:, i:i + 512].pow(2).sum(dim=-1) for i in range(0, n, 512)], dim=-1).sum(dim=-1)
    rstd = 1.0 / torch.sqrt(ss[:, None] / n + eps)
    return ((h * w.float()) * rstd).to(x.dtype), r_new


def alt_unrounded_sum(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor,
                      eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalizes the fp32 sum before its rounding: accepted (measured at up to 0.23 of the bound on
    CPU), not listed in [validate] because its margin is under 4x."""
    h = x.float() + r.float()
    rstd = torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (h * rstd * w.float()).to(x.dtype), h.to(x.dtype)


def _norm(h: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Helper: fp32 RMSNorm of an fp32 tensor, rounded to bf16."""
    return (h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps) * w.float()).to(torch.bfloat16)


def wrong_norm_of_branch(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor,
                         eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalizes the branch output x instead of the new residual."""
    return _norm(x.float(), w, eps), x + r


def wrong_stale_residual(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor,
                         eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """y right, but the residual output is the old residual (the sum never stored)."""
    r_new = x + r
    return _norm(r_new.float(), w, eps), r.clone()


def wrong_swapped_outputs(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor,
                          eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The two outputs written to each other's buffer (vLLM's in-place convention confused)."""
    r_new = x + r
    return r_new, _norm(r_new.float(), w, eps)


def wrong_eps_outside_sqrt(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor,
                           eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """eps added to the root instead of to the mean square."""
    r_new = x + r
    h = r_new.float()
    return (h / (h.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps) * w.float()).to(x.dtype), r_new


def wrong_no_weight(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor,
                    eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight multiply forgotten."""
    r_new = x + r
    return _norm(r_new.float(), torch.ones_like(w), eps), r_new
