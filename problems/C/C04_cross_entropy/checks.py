"""Validation formulations of C04 cross_entropy for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Correct, another precision path: logsumexp and the gather in fp64, rounded to fp32 once."""
    x = logits.double()
    return (torch.logsumexp(x, dim=-1) - x.gather(1, target[:, None])[:, 0]).float()


def alt_online_lse(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Correct, another accumulation order: one pass over column blocks of 2048 with a running
    max and a rescaled running sum; the target logit is picked up in the block that holds it."""
    t_rows = logits.shape[0]
    m = torch.full((t_rows,), float("-inf"), device=logits.device)
    s = torch.zeros(t_rows, device=logits.device)
    picked = torch.zeros(t_rows, device=logits.device)
    for j in range(0, logits.shape[1], 2048):
        xb = logits[:, j:j + 2048].float()
        m_new = torch.maximum(m, xb.amax(dim=-1))
        s = s * torch.exp(m - m_new) + torch.exp(xb - m_new[:, None]).sum(dim=-1)
        m = m_new
        inside = (target >= j) & (target < j + xb.shape[1])
        local = (target - j).clamp(0, xb.shape[1] - 1)
        picked = torch.where(inside, xb.gather(1, local[:, None])[:, 0], picked)
    return m + torch.log(s) - picked


def wrong_no_max_subtraction(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Slip: log(sum(exp(x))) without the max shift (exp overflows above 88.7)."""
    x = logits.float()
    return torch.log(torch.exp(x).sum(dim=-1)) - x.gather(1, target[:, None])[:, 0]


def wrong_max_not_added_back(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Slip: the shift is applied inside the exp but not added back to the log-sum-exp."""
    x = logits.float()
    m = x.amax(dim=-1, keepdim=True)
    return torch.log(torch.exp(x - m).sum(dim=-1)) - x.gather(1, target[:, None])[:, 0]


def wrong_bf16_log_probs(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Slip: the target's log-probability is stored in bf16 before it is negated and widened."""
    x = logits.float()
    logp = (x - torch.logsumexp(x, dim=-1, keepdim=True)).bfloat16()
    return -logp.gather(1, target[:, None])[:, 0].float()


def wrong_bf16_sum(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Slip: the running sum of exponentials is kept in bf16 (a sequential per-thread loop over
    strided columns, 256 threads per row, then a bf16 tree over the threads)."""
    x = logits.float()
    m = x.amax(dim=-1, keepdim=True)
    e = torch.exp(x - m)
    pad = (-e.shape[1]) % 256
    e = torch.cat([e, torch.zeros(e.shape[0], pad, device=logits.device)], dim=1).reshape(e.shape[0], -1, 256)
    acc = torch.zeros(e.shape[0], 256, dtype=torch.bfloat16, device=logits.device)
    for k in range(e.shape[1]):
        acc = (acc.float() + e[:, k, :]).bfloat16()
    total = acc.float().sum(dim=-1).bfloat16().float()
    return m[:, 0] + torch.log(total) - x.gather(1, target[:, None])[:, 0]
