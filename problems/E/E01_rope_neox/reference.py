"""Reference and eager baselines for E01 rope_neox: half-split rotary embedding of q and k.

For token t at position p = positions[t] and pair index i < D/2, with c = cos_sin_cache[p, i] and
s = cos_sin_cache[p, D/2 + i], the pair (x[i], x[i + D/2]) of every head is rotated:
out[i] = x[i]*c - x[i+D/2]*s, out[i+D/2] = x[i+D/2]*c + x[i]*s (fp32 math, one rounding to bf16).
"""
import torch


def _cos_sin(positions: torch.Tensor, cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The [T, 1, D/2] cos and sin rows of every token (broadcast over heads)."""
    cs = cos_sin_cache.index_select(0, positions)
    cos, sin = cs.chunk(2, dim=-1)
    return cos.unsqueeze(1), sin.unsqueeze(1)


def _rope_fp32(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    x1, x2 = xf.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def reference(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
              q_out: torch.Tensor, k_out: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 rotation of each (i, i + D/2) pair, one rounding."""
    cos, sin = _cos_sin(positions, cos_sin_cache.float())
    q_out.copy_(_rope_fp32(q, cos, sin))
    k_out.copy_(_rope_fp32(k, cos, sin))


def rope_chain(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
               cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: vLLM's native chain of ops (gather, chunk, multiply, cat); the fp32 table
    promotes the products to fp32, so the result is rounded to bf16 once."""
    cos, sin = _cos_sin(positions, cos_sin_cache)
    out = []
    for x in (q, k):
        x1, x2 = torch.chunk(x, 2, dim=-1)
        out.append(torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype))
    return out[0], out[1]


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_rotate_half(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
                     cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: Hugging Face's formulation, x * cos + rotate_half(x) * sin with cos and sin
    repeated over both halves (fp32 because the table is fp32)."""
    cos, sin = _cos_sin(positions, cos_sin_cache)
    cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)
    return ((q * cos + _rotate_half(q) * sin).to(q.dtype), (k * cos + _rotate_half(k) * sin).to(k.dtype))
