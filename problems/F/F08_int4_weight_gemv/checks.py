"""Validation formulations of F08 int4_weight_gemv for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_group_sums(x: torch.Tensor, wq: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
    """Validation: the scale factored out of each group, as int4 GEMV kernels do: per group, an
    fp32 dot product of x with the integer codes minus 8, then times the group's scale, summed."""
    n, k = wq.shape[0], 2 * wq.shape[1]
    g = k // group_size
    q = (_nibbles(wq) - 8).float().view(n, g, group_size)
    xg = x.float().view(x.shape[0], g, group_size)
    partial = torch.einsum("mgc,ngc->mng", xg, q)
    return (partial * scales.float()[None]).sum(dim=-1)


def alt_fp32_dequant(x: torch.Tensor, wq: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
    """Validation: the weights dequantized exactly in fp32 (a 4-bit code times a bf16 scale fits),
    one fp32 matmul."""
    w = (_nibbles(wq) - 8).float() * scales.float().repeat_interleave(group_size, dim=1)
    return x.float() @ w.t()


def wrong_nibble_order(x: torch.Tensor, wq: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
    """Planted slip: the even k read from the high nibble (torch's/tinygemm's order, not this one)."""
    swapped = ((wq & 0xF) << 4) | (wq >> 4)
    w = (_nibbles(swapped) - 8).float() * scales.float().repeat_interleave(group_size, dim=1)
    return x.float() @ w.t()


def wrong_signed_nibble(x: torch.Tensor, wq: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
    """Planted slip: the nibble read as a two's-complement int4 (-8..7) instead of unsigned minus 8."""
    q = _nibbles(wq)
    q = torch.where(q >= 8, q - 16, q)
    w = q.float() * scales.float().repeat_interleave(group_size, dim=1)
    return x.float() @ w.t()


def wrong_no_zero_point(x: torch.Tensor, wq: torch.Tensor, scales: torch.Tensor, group_size: int) -> torch.Tensor:
    """Planted slip: the zero point 8 not subtracted."""
    w = _nibbles(wq).float() * scales.float().repeat_interleave(group_size, dim=1)
    return x.float() @ w.t()


def wrong_scales_transposed(x: torch.Tensor, wq: torch.Tensor, scales: torch.Tensor,
                            group_size: int) -> torch.Tensor:
    """Planted slip: the scales read as a [K / 128, N] array (GPTQ's layout) instead of [N, K / 128]."""
    n, g = scales.shape
    s = scales.reshape(g, n).t().float()
    w = (_nibbles(wq) - 8).float() * s.repeat_interleave(group_size, dim=1)
    return x.float() @ w.t()
