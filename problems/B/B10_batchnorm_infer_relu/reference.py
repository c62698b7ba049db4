"""Reference, eager baseline and validation variants for B10 batchnorm_infer_relu:
y = relu((x - running_mean) * rsqrt(running_var + eps) * w + b) per channel of an NCHW fp16 x
(inference BatchNorm with fp32 statistics and affine parameters, as under autocast)."""
import torch
import torch.nn.functional as F


def _c(v: torch.Tensor) -> torch.Tensor:
    """A [C] vector as [1, C, 1, 1] for broadcasting over NCHW."""
    return v.reshape(1, -1, 1, 1)


def reference(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor, w: torch.Tensor,
              b: torch.Tensor, y: torch.Tensor, eps: float) -> None:
    """Readable reference, destination-passing: fp32 math, one rounding to fp16."""
    v = (x.float() - _c(running_mean)) * torch.rsqrt(_c(running_var) + eps) * _c(w) + _c(b)
    y.copy_(torch.relu(v))


# ---- eager formulation (timed on the GPU) ----

def batch_norm_relu(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor, w: torch.Tensor,
                    b: torch.Tensor, eps: float) -> torch.Tensor:
    """Eager baseline: PyTorch's inference BatchNorm (fp16 input, fp32 parameters), then an in-place ReLU."""
    return F.relu(F.batch_norm(x, running_mean, running_var, w, b, training=False, eps=eps), inplace=True)


# ---- independent correct formulations ([validate] correct) ----


# ---- planted slips ([validate] wrong): each must fail ----
