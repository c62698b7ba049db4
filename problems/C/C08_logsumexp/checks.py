"""Validation formulations of C08 logsumexp for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch


def alt_fp64(x: torch.Tensor) -> torch.Tensor:
    """Correct, another precision path: torch.logsumexp in fp64, rounded to fp32 once."""
    return torch.logsumexp(x.double(), dim=-1).float()


def alt_online(x: torch.Tensor) -> torch.Tensor:
    """Correct, another accumulation order: one pass over column blocks of 1024 with a running
    max and a rescaled running sum, exp and log through exp2 and log2."""
    log2e = 1.4426950408889634
    m = torch.full(x.shape[:-1], float("-inf"), device=x.device)
    s = torch.zeros(x.shape[:-1], device=x.device)
    for j in range(0, x.shape[-1], 1024):
        xb = x[:, j:j + 1024].float()
        m_new = torch.maximum(m, xb.amax(dim=-1))
        s = s * torch.exp2((m - m_new) * log2e) + torch.exp2((xb - m_new[:, None]) * log2e).sum(dim=-1)
        m = m_new
    return m + torch.log2(s) * math.log(2.0)


def alt_split_rows(x: torch.Tensor) -> torch.Tensor:
    """Correct, a third order: each row split over 13 blocks, each block's (max, sum) combined
    with the exp(m_b - m) rescale."""
    parts = [c.float() for c in x.tensor_split(13, dim=-1) if c.shape[-1]]
    ms = torch.stack([c.amax(dim=-1) for c in parts], dim=-1)
    ss = torch.stack([torch.exp(c - c.amax(dim=-1, keepdim=True)).sum(dim=-1) for c in parts], dim=-1)
    m = ms.amax(dim=-1)
    return m + torch.log((ss * torch.exp(ms - m[:, None])).sum(dim=-1))


def wrong_no_max_subtraction(x: torch.Tensor) -> torch.Tensor:
    """Slip: log(sum(exp(x))) without the max shift (exp overflows above 88.7)."""
    return torch.log(torch.exp(x.float()).sum(dim=-1))


def wrong_max_not_added_back(x: torch.Tensor) -> torch.Tensor:
    """Slip: the shift is applied inside the exp but not added back after the log."""
    xf = x.float()
    return torch.log(torch.exp(xf - xf.amax(dim=-1, keepdim=True)).sum(dim=-1))


def wrong_bf16_sum(x: torch.Tensor) -> torch.Tensor:
    """Slip: the running sum of exponentials is kept in bf16 (a sequential per-thread loop over
    strided columns, 256 threads per row, then a bf16 tree over the threads)."""
    xf = x.float()
    m = xf.amax(dim=-1, keepdim=True)
    e = torch.exp(xf - m)
    pad = (-e.shape[1]) % 256
    e = torch.cat([e, torch.zeros(e.shape[0], pad, device=x.device)], dim=1).reshape(e.shape[0], -1, 256)
    acc = torch.zeros(e.shape[0], 256, dtype=torch.bfloat16, device=x.device)
    for k in range(e.shape[1]):
        acc = (acc.float() + e[:, k, :]).bfloat16()
    return m[:, 0] + torch.log(acc.float().sum(dim=-1).bfloat16().float())


def wrong_log2_not_rescaled(x: torch.Tensor) -> torch.Tensor:
    """Slip: the exp2 path's sum is right, but its log2 is added to the max without the ln(2)."""
    log2e = 1.4426950408889634
    xf = x.float()
    m = xf.amax(dim=-1)
    return m + torch.log2(torch.exp2((xf - m[:, None]) * log2e).sum(dim=-1))


def wrong_bf16_result(x: torch.Tensor) -> torch.Tensor:
    """Slip: the result is stored in the input dtype (bf16) and widened afterwards."""
    xf = x.float()
    m = xf.amax(dim=-1)
    return (m + torch.log(torch.exp(xf - m[:, None]).sum(dim=-1))).bfloat16().float()
