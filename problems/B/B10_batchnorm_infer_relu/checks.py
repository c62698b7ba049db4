"""Validation formulations of B10 batchnorm_infer_relu for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F


def alt_fp64(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor, w: torch.Tensor,
             b: torch.Tensor, eps: float) -> torch.Tensor:
    """fp64, dividing by the standard deviation, clamp at zero."""
    v = (x.double() - _c(running_mean.double())) / torch.sqrt(_c(running_var.double()) + eps)
    return (v * _c(w.double()) + _c(b.double())).clamp_min(0.0).to(x.dtype)


def alt_folded_fp32(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor, w: torch.Tensor,
                    b: torch.Tensor, eps: float) -> torch.Tensor:
    """The statistics folded into one fp32 scale and shift per channel (as a deployed kernel does):
    y = relu(x * s + t), s = w * rsqrt(var + eps), t = b - mean * s."""
    s = w * torch.rsqrt(running_var + eps)
    t = b - running_mean * s
    return torch.relu(torch.addcmul(_c(t), x.float(), _c(s))).to(x.dtype)


def wrong_batch_statistics(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor,
                           w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """Training-mode statistics: the batch's own mean and variance instead of the running ones."""
    v = F.batch_norm(x.float(), None, None, w, b, training=True, eps=eps)
    return torch.relu(v).to(x.dtype)


def wrong_eps_outside_sqrt(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor,
                           w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """eps added to the standard deviation instead of to the variance."""
    v = (x.float() - _c(running_mean)) / (torch.sqrt(_c(running_var)) + eps) * _c(w) + _c(b)
    return torch.relu(v).to(x.dtype)


def wrong_var_as_std(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor, w: torch.Tensor,
                     b: torch.Tensor, eps: float) -> torch.Tensor:
    """The running variance used as a standard deviation (square root forgotten)."""
    v = (x.float() - _c(running_mean)) / (_c(running_var) + eps) * _c(w) + _c(b)
    return torch.relu(v).to(x.dtype)


def wrong_channels_last(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor,
                        w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """A channels-last kernel run on NCHW memory: element i takes the parameters of channel i % C."""
    c = x.shape[1]
    flat = x.float().reshape(-1, c)  # consecutive memory chunks of C elements
    v = (flat - running_mean) * torch.rsqrt(running_var + eps) * w + b
    return torch.relu(v).reshape(x.shape).to(x.dtype)


def wrong_relu_before_affine(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor,
                             w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """ReLU applied to the normalized value, the weight and bias after it."""
    xn = torch.relu((x.float() - _c(running_mean)) * torch.rsqrt(_c(running_var) + eps))
    return (xn * _c(w) + _c(b)).to(x.dtype)
