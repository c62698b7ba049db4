"""Reference and eager baselines for E11 merge_attention_states (vLLM's merge_attn_states).

For token t and head h, with a = prefix_lse[h, t], b = suffix_lse[h, t], m = max(a, b):
wa = exp(a - m), wb = exp(b - m); output[t, h] = (wa * prefix_output[t, h] + wb * suffix_output[t, h])
/ (wa + wb) and output_lse[h, t] = m + log(wa + wb); fp32 math, the output rounded once to bf16.
"""
import torch


def _merge(po: torch.Tensor, pl: torch.Tensor, so: torch.Tensor, sl: torch.Tensor,
           dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """The merge in `dtype`: (output [T, H, D], output_lse [H, T])."""
    a, b = pl.to(dtype).t(), sl.to(dtype).t()  # [T, H]
    m = torch.maximum(a, b)
    wa, wb = torch.exp(a - m), torch.exp(b - m)
    den = wa + wb
    out = (po.to(dtype) * (wa / den).unsqueeze(-1) + so.to(dtype) * (wb / den).unsqueeze(-1))
    return out, (m + torch.log(den)).t()


def reference(prefix_output: torch.Tensor, prefix_lse: torch.Tensor, suffix_output: torch.Tensor,
              suffix_lse: torch.Tensor, output: torch.Tensor, output_lse: torch.Tensor) -> None:
    """Readable reference, destination-passing: max-shifted exponentials of the two lse, their
    normalized weights, the weighted sum in fp32 (one rounding to bf16) and the merged lse."""
    out, lse = _merge(prefix_output, prefix_lse, suffix_output, suffix_lse, torch.float32)
    output.copy_(out)
    output_lse.copy_(lse)


def merge_chain(prefix_output: torch.Tensor, prefix_lse: torch.Tensor, suffix_output: torch.Tensor,
                suffix_lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: vLLM's PyTorch formulation as a chain of ops (max, shifted exp, scales,
    weighted sum in fp32, cast)."""
    m = torch.maximum(prefix_lse, suffix_lse)
    p_se, s_se = torch.exp(prefix_lse - m), torch.exp(suffix_lse - m)
    out_se = p_se + s_se
    p_scale = (p_se / out_se).t().unsqueeze(-1)
    s_scale = (s_se / out_se).t().unsqueeze(-1)
    out = prefix_output * p_scale + suffix_output * s_scale
    return out.to(prefix_output.dtype), torch.log(out_se) + m


def merge_logaddexp(prefix_output: torch.Tensor, prefix_lse: torch.Tensor, suffix_output: torch.Tensor,
                    suffix_lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: the merged lse first (torch.logaddexp), then each weight exp(lse_i - lse)."""
    lse = torch.logaddexp(prefix_lse, suffix_lse)
    wp = torch.exp(prefix_lse - lse).t().unsqueeze(-1)
    ws = torch.exp(suffix_lse - lse).t().unsqueeze(-1)
    return torch.addcmul(prefix_output * wp, suffix_output, ws).to(prefix_output.dtype), lse
