"""Validation formulations of F07 int8_quant_dequant for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_chunked(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validation: rows in chunks of 5, the amax as a running max over column blocks of 160,
    rounding written as floor(v + 1/2) with ties fixed to even (in fp64, exact), the product
    q * s exact in fp64 and rounded once to bf16."""
    qs, ss, ds = [], [], []
    for xc in torch.split(x, 5):
        amax = torch.zeros(xc.shape[0], 1, dtype=torch.float64, device=x.device)
        for blk in torch.split(xc.double().abs(), 160, dim=1):
            amax = torch.maximum(amax, blk.amax(dim=1, keepdim=True))
        sc = (amax / INT8_MAX).clamp(min=MIN_SCALE).float()
        v = (xc.float() / sc).double()
        r = torch.floor(v + 0.5)
        r = torch.where((r - v == 0.5) & (torch.remainder(r, 2) == 1), r - 1, r)  # ties to even
        r = r.clamp(-INT8_MAX, INT8_MAX)
        qs.append(r.to(torch.int8))
        ss.append(sc)
        ds.append(r * sc.double())
    return torch.cat(qs), torch.cat(ss), torch.cat(ds)


def wrong_amax_signed(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Planted slip: the row max instead of the max of |x|; negative values beyond it clip."""
    s = (x.amax(dim=-1, keepdim=True).float() / INT8_MAX).clamp_(min=MIN_SCALE)
    qf = torch.round(x.float() / s).clamp_(-INT8_MAX, INT8_MAX)
    return qf.to(torch.int8), s, qf * s


def wrong_uint8_range(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Planted slip: the scale for 255 levels (amax / 255, an unsigned range) with the int8 clamp,
    so every value above amax / 2 clips."""
    s = (x.abs().amax(dim=-1, keepdim=True).float() / 255.0).clamp_(min=MIN_SCALE)
    qf = torch.round(x.float() / s).clamp_(-INT8_MAX, INT8_MAX)
    return qf.to(torch.int8), s, qf * s


def wrong_scale_bf16(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Planted slip: the scale computed in x's dtype (bf16), off by up to 2^-9."""
    s = (x.abs().amax(dim=-1, keepdim=True) / INT8_MAX).float()
    qf = torch.round(x.float() / s).clamp_(-INT8_MAX, INT8_MAX)
    return qf.to(torch.int8), s, qf * s


def wrong_dequant_divide(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Planted slip: q and s right, the dequantization divides by the scale instead of multiplying."""
    s = (x.abs().amax(dim=-1, keepdim=True).float() / INT8_MAX).clamp_(min=MIN_SCALE)
    qf = torch.round(x.float() / s).clamp_(-INT8_MAX, INT8_MAX)
    return qf.to(torch.int8), s, qf / s
