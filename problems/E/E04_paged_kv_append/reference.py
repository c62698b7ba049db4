"""Reference and eager baselines for E04 paged_kv_append (vLLM's reshape_and_cache_flash).

Token t goes to slot s = slot_mapping[t], i.e. block s // BS, offset s % BS of the caches
[NB, BS, HK, D]: key_cache[s // BS, s % BS] = key[t], value_cache[s // BS, s % BS] = value[t].
The caches are updated in place; formulations other than the reference update the caches they
are given and return (key_cache, value_cache).
"""
import torch


def reference(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
              slot_mapping: torch.Tensor) -> None:
    """Readable reference: block and offset of each slot, one advanced-indexing write per cache."""
    bs = key_cache.shape[1]
    block, offset = slot_mapping // bs, slot_mapping % bs
    key_cache[block, offset] = key
    value_cache[block, offset] = value


def cache_index_put(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                    slot_mapping: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: vLLM's native formulation, the caches flattened to [NB*BS, HK, D] and
    written with index_put_ at the slots."""
    hk, d = key.shape[1:]
    key_cache.view(-1, hk, d)[slot_mapping] = key
    value_cache.view(-1, hk, d)[slot_mapping] = value
    return key_cache, value_cache


def cache_index_copy(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
                     slot_mapping: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: index_copy_ of the token rows into the flattened caches."""
    hk, d = key.shape[1:]
    key_cache.view(-1, hk, d).index_copy_(0, slot_mapping, key)
    value_cache.view(-1, hk, d).index_copy_(0, slot_mapping, value)
    return key_cache, value_cache
