"""Validation formulations of E11 merge_attention_states for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(prefix_output: torch.Tensor, prefix_lse: torch.Tensor, suffix_output: torch.Tensor,
             suffix_lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct: the reference in fp64."""
    out, lse = _merge(prefix_output, prefix_lse, suffix_output, suffix_lse, torch.float64)
    return out.to(prefix_output.dtype), lse.float()


def alt_softmax_of_lses(prefix_output: torch.Tensor, prefix_lse: torch.Tensor, suffix_output: torch.Tensor,
                        suffix_lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct: the two weights as a softmax over the stacked lse, the merged lse as their
    logsumexp, the outputs combined with an einsum over the stack."""
    lses = torch.stack((prefix_lse, suffix_lse)).transpose(1, 2)  # [2, T, H]
    w = torch.softmax(lses, dim=0)
    outs = torch.stack((prefix_output, suffix_output)).float()  # [2, T, H, D]
    out = torch.einsum("sth,sthd->thd", w, outs)
    return out.to(prefix_output.dtype), torch.logsumexp(lses, dim=0).t()


def wrong_lse_base2(prefix_output: torch.Tensor, prefix_lse: torch.Tensor, suffix_output: torch.Tensor,
                    suffix_lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: the natural-log lse treated as base 2 (exp2 and log2, no log2(e) conversion), as a
    kernel written for base-2 partial states would do."""
    m = torch.maximum(prefix_lse, suffix_lse).double()
    wa, wb = torch.exp2(prefix_lse - m), torch.exp2(suffix_lse - m)
    den = wa + wb
    out = (prefix_output.double() * (wa / den).t().unsqueeze(-1)
           + suffix_output.double() * (wb / den).t().unsqueeze(-1))
    return out.to(prefix_output.dtype), (m + torch.log2(den)).float()


def wrong_lse_token_major(prefix_output: torch.Tensor, prefix_lse: torch.Tensor, suffix_output: torch.Tensor,
                          suffix_lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: the lse buffers read as [T, H] (flash-attention's per-token order) instead of
    vLLM's [H, T], and the merged lse written the same way."""
    h, t = prefix_lse.shape
    pl = prefix_lse.reshape(t, h).t()
    sl = suffix_lse.reshape(t, h).t()
    out, lse = _merge(prefix_output, pl, suffix_output, sl, torch.float64)
    return out.to(prefix_output.dtype), lse.t().reshape(h, t).float()


def wrong_out_lse_without_max(prefix_output: torch.Tensor, prefix_lse: torch.Tensor, suffix_output: torch.Tensor,
                              suffix_lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: the merged lse written as log(wa + wb), the max shift not added back."""
    out, lse = _merge(prefix_output, prefix_lse, suffix_output, suffix_lse, torch.float64)
    m = torch.maximum(prefix_lse, suffix_lse).double()
    return out.to(prefix_output.dtype), (lse - m).float()


def wrong_equal_weights(prefix_output: torch.Tensor, prefix_lse: torch.Tensor, suffix_output: torch.Tensor,
                        suffix_lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: the two partial outputs averaged (weights 1/2), the merged lse right."""
    out = (prefix_output.double() + suffix_output.double()) / 2
    return out.to(prefix_output.dtype), torch.logaddexp(prefix_lse.double(), suffix_lse.double()).float()
