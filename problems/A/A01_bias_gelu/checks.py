"""Validation formulations of A01 bias_gelu for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch
import torch.nn.functional as F

# Chebyshev fit erfc(z) = t * exp(-z^2 + P(t)), t = 1 / (1 + z / 2), relative error < 1.2e-7 for
# z >= 0 (one expert solution's form, in base 2 with the factor 1/2 folded into the exponent).
_LOG2E = math.log2(math.e)
_ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
           0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)
_P2 = tuple(c * _LOG2E - (1.0 if i == 0 else 0.0) for i, c in enumerate(_ERFC_P))
# Abramowitz & Stegun 7.1.26: erfc(a) = (a1 t + ... + a5 t^5) exp(-a^2), t = 1 / (1 + p a),
# absolute error <= 1.5e-7 (the other expert solution's form).
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def alt_fp64(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Validation: the same formula in fp64, rounded to fp32 and then to bf16."""
    v = x.double() + b.double()
    return (0.5 * v * (1.0 + torch.erf(v / math.sqrt(2.0)))).float().to(torch.bfloat16)


def alt_erfc_fit(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Validation: one expert solution's math in fp32, gelu(v) = max(v, 0) - |0.5 v erfc(|v| / sqrt 2)|
    with the erfc fit above (no cancellation for negative v)."""
    v = x.float() + b.float()
    za = (v * math.sqrt(_LOG2E / 2.0)).abs()
    t = 1.0 / (za * (0.5 / math.sqrt(_LOG2E)) + 1.0)
    p = t * _P2[9] + _P2[8]
    for c in _P2[7::-1]:
        p = p * t + c
    h = v * (t * torch.exp2(p - za * za))
    return (v.clamp_min(0.0) - h.abs()).to(torch.bfloat16)


def alt_as_erfc(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Validation: the other expert solution's math in fp32, max(v, 0) - 0.5 |v| erfc(|v| / sqrt 2) with the
    A&S 7.1.26 erfc."""
    v = x.float() + b.float()
    av = v.abs()
    t = 1.0 / (av * (_AS_P * 0.7071067811865476) + 1.0)
    r = torch.full_like(v, 0.5 * _AS_A[4])
    for c in _AS_A[3::-1]:
        r = r * t + 0.5 * c
    r = r * t
    e = torch.exp2((v * (-0.5 * _LOG2E)) * v)
    return (v.clamp_min(0.0) - r * (av * e)).to(torch.bfloat16)


def wrong_no_bias(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Planted slip: the bias is left out."""
    return F.gelu(x.float()).to(torch.bfloat16)


def wrong_bias_after_gelu(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Planted slip: the bias is added after the activation, gelu(x) + b."""
    return (F.gelu(x.float()) + b.float()).to(torch.bfloat16)


def wrong_erf_missing_rsqrt2(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Planted slip: erf(v) instead of erf(v / sqrt 2)."""
    v = x.float() + b.float()
    return (0.5 * v * (1.0 + torch.erf(v))).to(torch.bfloat16)


def wrong_missing_half(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Planted slip: the factor 1/2 is left out, v * (1 + erf(v / sqrt 2))."""
    v = x.float() + b.float()
    return (v * (1.0 + torch.erf(v * 0.7071067811865476))).to(torch.bfloat16)
