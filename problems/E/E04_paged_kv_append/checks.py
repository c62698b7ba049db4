"""Validation formulations of E04 paged_kv_append for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_block_offset_loop(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                          value_cache: torch.Tensor, slot_mapping: torch.Tensor
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct: token by token, block and offset from divmod."""
    bs = key_cache.shape[1]
    for t, s in enumerate(slot_mapping.tolist()):
        blk, off = divmod(s, bs)
        key_cache[blk, off].copy_(key[t])
        value_cache[blk, off].copy_(value[t])
    return key_cache, value_cache


def wrong_head_major_layout(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                            value_cache: torch.Tensor, slot_mapping: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: the caches addressed as [NB, HK, BS, D] (the head-major block layout of other
    backends) instead of [NB, BS, HK, D]."""
    nb, bs, hk, d = key_cache.shape
    block, offset = slot_mapping // bs, slot_mapping % bs
    key_cache.view(nb, hk, bs, d)[block, :, offset] = key
    value_cache.view(nb, hk, bs, d)[block, :, offset] = value
    return key_cache, value_cache


def wrong_kv_swapped(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                     value_cache: torch.Tensor, slot_mapping: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: keys written into the value cache and values into the key cache."""
    return cache_index_put(value, key, key_cache, value_cache, slot_mapping)


def wrong_drop_tail_tokens(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
                           value_cache: torch.Tensor, slot_mapping: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: tokens handled in tiles of 64 and the last partial tile dropped."""
    n = key.shape[0] // 64 * 64
    return cache_index_put(key[:n], value[:n], key_cache, value_cache, slot_mapping[:n])
