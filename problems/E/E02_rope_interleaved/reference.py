"""Reference and eager baselines for E02 rope_interleaved: GPT-J style rotary embedding of q and k.

For token t at position p = positions[t] and pair index i < D/2, with c = cos_sin_cache[p, i] and
s = cos_sin_cache[p, D/2 + i], the adjacent pair (x[2i], x[2i+1]) of every head is rotated:
out[2i] = x[2i]*c - x[2i+1]*s, out[2i+1] = x[2i+1]*c + x[2i]*s (fp32 math, one rounding to bf16).
"""
import torch


def _cos_sin(positions: torch.Tensor, cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The [T, 1, D/2] cos and sin rows of every token (broadcast over heads)."""
    cs = cos_sin_cache.index_select(0, positions)
    cos, sin = cs.chunk(2, dim=-1)
    return cos.unsqueeze(1), sin.unsqueeze(1)


def _rope_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the adjacent pairs of x (already in the compute dtype) and interleave them back."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)


def reference(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
              q_out: torch.Tensor, k_out: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 rotation of each (2i, 2i+1) pair, one rounding."""
    cos, sin = _cos_sin(positions, cos_sin_cache.float())
    q_out.copy_(_rope_pairs(q.float(), cos, sin))
    k_out.copy_(_rope_pairs(k.float(), cos, sin))


def rope_chain(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
               cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: vLLM's native GPT-J chain of ops (strided halves, stack, flatten); the fp32
    table promotes the products to fp32, so the result is rounded to bf16 once."""
    cos, sin = _cos_sin(positions, cos_sin_cache)
    return _rope_pairs(q, cos, sin).to(q.dtype), _rope_pairs(k, cos, sin).to(k.dtype)


def rope_complex(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
                 cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: Meta's Llama formulation, adjacent pairs viewed as complex64 numbers and
    multiplied by cos + j*sin."""
    cos, sin = _cos_sin(positions, cos_sin_cache)
    rot = torch.complex(cos, sin)
    out = []
    for x in (q, k):
        z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        out.append(torch.view_as_real(z * rot).flatten(-2).to(x.dtype))
    return out[0], out[1]
