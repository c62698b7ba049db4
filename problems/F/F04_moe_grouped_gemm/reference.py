"""Reference and eager baselines for F04 moe_grouped_gemm: the rows of a
come in expert order, counts[e] of them for expert e; out[rows of e] = a[rows of e] @ w[e]^T."""
import torch
import torch.nn.functional as F


def reference(a: torch.Tensor, w: torch.Tensor, counts: torch.Tensor, out: torch.Tensor) -> None:
    """Readable reference, destination-passing: one fp64 product per expert's block of rows."""
    start = 0
    for e, n in enumerate(counts.tolist()):
        out[start:start + n] = a[start:start + n].double() @ w[e].double().t()
        start += n


def loop_linear(a: torch.Tensor, w: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Eager baseline: split the rows by counts (one host sync), one F.linear per expert, concat."""
    parts = torch.split(a, counts.tolist())
    return torch.cat([F.linear(p, w[e]) for e, p in enumerate(parts)])


def grouped_mm(a: torch.Tensor, w: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Eager baseline: PyTorch's grouped GEMM (one kernel on sm_90) with the groups' end offsets."""
    offs = torch.cumsum(counts, dim=0, dtype=torch.int32)
    return F.grouped_mm(a, w.transpose(-2, -1), offs=offs)
