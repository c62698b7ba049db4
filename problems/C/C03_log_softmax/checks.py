"""Validation formulations of C03 log_softmax for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F


def alt_fp64(x: torch.Tensor) -> torch.Tensor:
    """Correct, another precision path: the same chain in fp64, rounded to fp32 once."""
    xd = x.double()
    return (xd - torch.logsumexp(xd, dim=-1, keepdim=True)).float()


def alt_online_lse(x: torch.Tensor) -> torch.Tensor:
    """Correct, another accumulation order: a one-pass online log-sum-exp over column blocks of
    384 (running max, rescaled running sum), then a second pass writing x - lse."""
    m = torch.full(x.shape[:-1], float("-inf"), device=x.device)
    s = torch.zeros(x.shape[:-1], device=x.device)
    for j in range(0, x.shape[-1], 384):
        xb = x[..., j:j + 384].float()
        m_new = torch.maximum(m, xb.amax(dim=-1))
        s = s * torch.exp(m - m_new) + torch.exp(xb - m_new[..., None]).sum(dim=-1)
        m = m_new
    return x.float() - (m + torch.log(s))[..., None]


def wrong_no_max_subtraction(x: torch.Tensor) -> torch.Tensor:
    """Slip: log(sum(exp(x))) without the max shift (exp overflows above 88.7)."""
    xf = x.float()
    return xf - torch.log(torch.exp(xf).sum(dim=-1, keepdim=True))


def wrong_bf16_result(x: torch.Tensor) -> torch.Tensor:
    """Slip: log-softmax in the input dtype (no dtype=float32), then widened to fp32."""
    return F.log_softmax(x, dim=-1).float()


def wrong_bf16_sum(x: torch.Tensor) -> torch.Tensor:
    """Slip: the running sum of exponentials is kept in bf16 (a sequential per-thread loop over
    strided columns, 128 threads per row, then a bf16 tree over the threads)."""
    xf = x.float()
    m = xf.amax(dim=-1, keepdim=True)
    e = torch.exp(xf - m)
    v = e.shape[-1]
    pad = (-v) % 128
    e = torch.cat([e, torch.zeros(*e.shape[:-1], pad, device=x.device)], dim=-1).reshape(*e.shape[:-1], -1, 128)
    acc = torch.zeros(*e.shape[:-2], 128, dtype=torch.bfloat16, device=x.device)
    for k in range(e.shape[-2]):
        acc = (acc.float() + e[..., k, :]).bfloat16()
    total = acc.float().sum(dim=-1, keepdim=True).bfloat16().float()
    return xf - (m + torch.log(total))


def wrong_max_not_added_back(x: torch.Tensor) -> torch.Tensor:
    """Slip: the shift is applied inside the exp but not added back: y = x - log(sum(exp(x - m)))."""
    xf = x.float()
    m = xf.amax(dim=-1, keepdim=True)
    return xf - torch.log(torch.exp(xf - m).sum(dim=-1, keepdim=True))
