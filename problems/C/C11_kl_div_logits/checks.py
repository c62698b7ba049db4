"""Validation formulations of C11 kl_div_logits for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F


def alt_fp64(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Correct, another precision path: the same chain in fp64, rounded to fp32 once."""
    logp = torch.log_softmax(p.double(), dim=-1)
    logq = torch.log_softmax(q.double(), dim=-1)
    return (logp.exp() * (logp - logq)).sum(dim=-1).float()


def alt_one_pass(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Correct, another formula and order: one pass over column blocks of 1000 keeping the running
    max and rescaled sums of exp(p - m_p) and exp(p - m_p) * (p - q), and the running max and sum
    of q; then KL = A / S_p - (m_p + log S_p) + (m_q + log S_q)."""
    rows = p.shape[0]
    mp = torch.full((rows,), float("-inf"), device=p.device)
    mq = torch.full((rows,), float("-inf"), device=p.device)
    sp, sq, a = torch.zeros(rows, device=p.device), torch.zeros(rows, device=p.device), torch.zeros(rows, device=p.device)
    for j in range(0, p.shape[1], 1000):
        pb, qb = p[:, j:j + 1000].float(), q[:, j:j + 1000].float()
        mp_new = torch.maximum(mp, pb.amax(dim=-1))
        f = torch.exp(mp - mp_new)
        e = torch.exp(pb - mp_new[:, None])
        sp = sp * f + e.sum(dim=-1)
        a = a * f + (e * (pb - qb)).sum(dim=-1)
        mp = mp_new
        mq_new = torch.maximum(mq, qb.amax(dim=-1))
        sq = sq * torch.exp(mq - mq_new) + torch.exp(qb - mq_new[:, None]).sum(dim=-1)
        mq = mq_new
    return a / sp - (mp + torch.log(sp)) + (mq + torch.log(sq))


def wrong_direction_swapped(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Slip: KL(Q || P) (F.kl_div's argument order confused)."""
    logp, logq = _log_softmax32(p), _log_softmax32(q)
    return (torch.exp(logq) * (logq - logp)).sum(dim=-1)


def wrong_no_max_subtraction(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Slip: the log-sum-exps taken without the max shift (exp overflows above 88.7)."""
    pf, qf = p.float(), q.float()
    logp = pf - torch.log(torch.exp(pf).sum(dim=-1, keepdim=True))
    logq = qf - torch.log(torch.exp(qf).sum(dim=-1, keepdim=True))
    return (torch.exp(logp) * (logp - logq)).sum(dim=-1)


def wrong_normalizers_dropped(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Slip: the weights are normalized, but the log-ratio uses the raw logits (p - q) without the
    difference of the two log-sum-exps."""
    logp = _log_softmax32(p)
    return (torch.exp(logp) * (p.float() - q.float())).sum(dim=-1)


def wrong_bf16_log_probs(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Slip: the log-probabilities are stored in bf16 (log_softmax without dtype=float32)."""
    logp = F.log_softmax(p, dim=-1).float()
    logq = F.log_softmax(q, dim=-1).float()
    return (torch.exp(logp) * (logp - logq)).sum(dim=-1)
