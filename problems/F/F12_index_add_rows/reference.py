"""Reference and eager baselines for F12 index_add_rows:
out[r, :] += sum over i with idx[i] == r of src[i, :], in place, accumulated in fp32 or wider,
rounded once to bf16. The output `out` is the input `out` updated in place."""
import torch


def reference(out: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> None:
    """Readable reference, updating `out` in place: fp64 index_add of every source row into the
    fp64 destination, one rounding to bf16."""
    out.copy_(out.double().index_add_(0, idx, src.double()))


def index_add_fp32(out: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Eager baseline: index_add_ into an fp32 copy of the destination, copied back (in place)."""
    acc = out.float()
    acc.index_add_(0, idx, src.float())
    return out.copy_(acc)


def scatter_add_fp32(out: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Eager baseline: scatter_add_ with the index broadcast over the row, in fp32 (in place)."""
    acc = out.float()
    acc.scatter_add_(0, idx[:, None].expand(-1, src.shape[1]), src.float())
    return out.copy_(acc)
