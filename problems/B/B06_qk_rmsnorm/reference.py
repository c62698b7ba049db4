"""Reference, eager baselines and validation variants for B06 qk_rmsnorm: RMSNorm over the head
dimension of every head of q [T, HQ, D] and k [T, HK, D], with one weight [D] for q and one for k."""
import torch
import torch.nn.functional as F


def _rms(t: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """fp32 RMSNorm over the last dimension (result in fp32)."""
    tf = t.float()
    return tf * torch.rsqrt(tf.pow(2).mean(dim=-1, keepdim=True) + eps) * w.float()


def reference(q: torch.Tensor, k: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, q_out: torch.Tensor,
              k_out: torch.Tensor, eps: float) -> None:
    """Readable reference, destination-passing: per-head fp32 RMSNorm, one rounding to bf16."""
    q_out.copy_(_rms(q, wq, eps))
    k_out.copy_(_rms(k, wk, eps))


# ---- eager formulations (timed on the GPU; t_ref is the fastest) ----

def fused_rms_norm(q: torch.Tensor, k: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
                   eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: PyTorch's fused RMSNorm, once for q and once for k (two kernels)."""
    d = (q.shape[-1],)
    return F.rms_norm(q, d, wq, eps), F.rms_norm(k, d, wk, eps)


def chain_of_ops(q: torch.Tensor, k: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: Qwen3's q_norm / k_norm as in Hugging Face (the LlamaRMSNorm chain of ops)."""
    def norm(t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = t.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
        return w * h.to(t.dtype)
    return norm(q, wq), norm(k, wk)


# ---- independent correct formulations ([validate] correct) ----


# ---- planted slips ([validate] wrong): each must fail ----
