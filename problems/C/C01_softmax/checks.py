"""Validation formulations of C01 softmax for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(x: torch.Tensor) -> torch.Tensor:
    """Correct, another precision path: the same chain in fp64, rounded to fp32 at the end."""
    d = x.double()
    e = torch.exp(d - d.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).float()


def _online_stats(x: torch.Tensor, block: int, rescale: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Running (max, sum of exp(x - max)) over column blocks, as a one-pass kernel keeps them."""
    m = torch.full(x.shape[:-1], float("-inf"), dtype=torch.float32, device=x.device)
    s = torch.zeros(x.shape[:-1], dtype=torch.float32, device=x.device)
    for j in range(0, x.shape[-1], block):
        xb = x[..., j:j + block].float()
        m_new = torch.maximum(m, xb.amax(dim=-1))
        factor = torch.exp(m - m_new) if rescale else torch.ones_like(s)
        s = s * factor + torch.exp(xb - m_new[..., None]).sum(dim=-1)
        m = m_new
    return m, s


def alt_online(x: torch.Tensor) -> torch.Tensor:
    """Correct, another accumulation order: online softmax (running max and rescaled running sum
    over blocks of 96 columns, fp32), then a second pass that normalizes."""
    m, s = _online_stats(x, 96, rescale=True)
    return torch.exp(x - m[..., None]) * (1.0 / s)[..., None]


def wrong_online_no_rescale(x: torch.Tensor) -> torch.Tensor:
    """Slip: online softmax that forgets to rescale the running sum when the running max grows."""
    m, s = _online_stats(x, 96, rescale=False)
    return torch.exp(x - m[..., None]) / s[..., None]


def wrong_bf16_exp(x: torch.Tensor) -> torch.Tensor:
    """Slip: the exponentials are kept in bf16 (registers or shared memory) between the passes."""
    e = torch.exp(x - x.amax(dim=-1, keepdim=True)).bfloat16().float()
    return e / e.sum(dim=-1, keepdim=True)


def wrong_sum_skips_tail(x: torch.Tensor) -> torch.Tensor:
    """Slip: the row sum covers only whole blocks of 128 columns (the ragged tail is dropped)."""
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    n = x.shape[-1] - x.shape[-1] % 128
    return e / e[..., :n].sum(dim=-1, keepdim=True)
