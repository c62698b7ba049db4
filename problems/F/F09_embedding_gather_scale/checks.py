"""Validation formulations of F09 embedding_gather_scale for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch
import torch.nn.functional as F


def alt_gemma_normalizer(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Validation: Gemma's formulation, the normalizer sqrt(D) itself rounded to bf16 first
    (exact for D = 4096; for D = 1000, 31.625 instead of 31.6228)."""
    normalizer = torch.tensor(math.sqrt(table.shape[1]), dtype=table.dtype, device=table.device)
    return F.embedding(ids, table) * normalizer


def alt_rowwise_fp64(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Validation: one row at a time through index_select, in fp64."""
    s = _scale(table.shape[1])
    rows = [table.index_select(0, ids[i:i + 1]).double() * s for i in range(ids.shape[0])]
    return torch.cat(rows)


def wrong_no_scale(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Planted slip: the plain embedding lookup, the sqrt(D) scaling forgotten."""
    return F.embedding(ids, table)


def wrong_inverse_scale(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Planted slip: D ** -0.5 (the attention-style scale) instead of sqrt(D)."""
    return F.embedding(ids, table) * (table.shape[1] ** -0.5)


def wrong_ids_one_based(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """Planted slip: ids taken as 1-based (row ids - 1; id 0 wraps to the last row)."""
    return table[(ids - 1) % table.shape[0]].float() * _scale(table.shape[1])
