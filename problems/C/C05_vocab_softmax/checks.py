"""Validation formulations of C05 vocab_softmax for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(x: torch.Tensor) -> torch.Tensor:
    """Correct, another precision path: the same chain in fp64, rounded to bf16 once."""
    xd = x.double()
    e = torch.exp(xd - xd.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)


def _online(x: torch.Tensor, block: int, rescale: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Running (max, sum of exp(x - max)) over column blocks, as a one-pass kernel keeps them."""
    m = torch.full(x.shape[:-1], float("-inf"), device=x.device)
    s = torch.zeros(x.shape[:-1], device=x.device)
    for j in range(0, x.shape[-1], block):
        xb = x[..., j:j + block].float()
        m_new = torch.maximum(m, xb.amax(dim=-1))
        s = (s * torch.exp(m - m_new) if rescale else s) + torch.exp(xb - m_new[..., None]).sum(dim=-1)
        m = m_new
    return m, s


def alt_online(x: torch.Tensor) -> torch.Tensor:
    """Correct, another accumulation order: online max and rescaled sum over blocks of 4096
    columns, then a normalizing pass (multiplying by 1 / sum)."""
    m, s = _online(x, 4096, rescale=True)
    return (torch.exp(x.float() - m[..., None]) * (1.0 / s)[..., None]).to(x.dtype)


def _split_stats(x: torch.Tensor, splits: int, rescale: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """A row split over `splits` blocks: each returns (its max, its sum of exp(x - its max));
    the partial results are combined to the row's (max, sum)."""
    parts = [c.float() for c in x.tensor_split(splits, dim=-1)]
    ms = torch.stack([c.amax(dim=-1) for c in parts], dim=-1)
    ss = torch.stack([torch.exp(c - c.amax(dim=-1, keepdim=True)).sum(dim=-1) for c in parts], dim=-1)
    m = ms.amax(dim=-1)
    s = (ss * torch.exp(ms - m[..., None])).sum(dim=-1) if rescale else ss.sum(dim=-1)
    return m, s


def alt_split_rows(x: torch.Tensor) -> torch.Tensor:
    """Correct, a third order: each row split over 7 blocks (partial max and sum, combined with
    the exp(m_b - m) rescale), then a normalizing pass."""
    m, s = _split_stats(x, 7, rescale=True)
    return (torch.exp(x.float() - m[..., None]) / s[..., None]).to(x.dtype)


def wrong_no_max_subtraction(x: torch.Tensor) -> torch.Tensor:
    """Slip: exp of the raw logits (overflows fp32 above 88.7)."""
    e = torch.exp(x.float())
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)


def wrong_online_no_rescale(x: torch.Tensor) -> torch.Tensor:
    """Slip: online softmax that does not rescale the running sum when the running max grows."""
    m, s = _online(x, 4096, rescale=False)
    return (torch.exp(x.float() - m[..., None]) / s[..., None]).to(x.dtype)


def wrong_split_combine_no_rescale(x: torch.Tensor) -> torch.Tensor:
    """Slip: a split row whose partial sums (each relative to its block's max) are added as they
    are, without the exp(m_b - m) factors."""
    m, s = _split_stats(x, 7, rescale=False)
    return (torch.exp(x.float() - m[..., None]) / s[..., None]).to(x.dtype)


def wrong_exp2_without_log2e(x: torch.Tensor) -> torch.Tensor:
    """Slip: exp through the hardware exp2 without the log2(e) factor, i.e. base-2 softmax."""
    xf = x.float()
    e = torch.exp2(xf - xf.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)
