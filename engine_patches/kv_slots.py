"""Patch of `KVCacheManager.allocate_slots` (vllm/v1/core/kv_cache_manager.py): a decode step whose
new token still fits in the request's last KV block returns at once.

The scheduler asks for slots for every running row on every step. With 16-token blocks, 15 steps in 16
need no new block, yet the stock call walks the whole general path each time (prefix hits, external and
encoder tokens, sliding windows, watermarks, block caching): ~16 % of an engine core's samples at 1,024
rows on an H100 (benchmarks/RESULTS.md, "H100 repeat: ... a profile of the engine core"). For the KV
layout this server runs, that path's answer in this case is known: no block to free, none to allocate,
none to cache, i.e. `empty_kv_cache_blocks`.

The shortcut is taken only when every one of these holds, so its answer is the stock one:
- the manager: exactly one KV cache group, full attention (`FullAttentionManager`, no sliding window to
  free), prefix caching off (nothing to cache), no context parallelism;
- the call: a running request, new tokens only (no prefix hit, no external or encoder tokens, no
  lookahead, no reservation, no admission check, no delayed caching);
- the request's blocks already hold `num_computed_tokens + num_new_tokens` slots.
Anything else, and every step that needs a block, goes to the stock method.
`tests/engine/test_kv_slots.py` checks the two against each other on random schedules.
"""

from collections.abc import Sequence
from typing import Any

from vllm.v1.core.kv_cache_manager import KVCacheBlocks, KVCacheManager
from vllm.v1.core.single_type_kv_cache_manager import FullAttentionManager
from vllm.v1.request import Request, RequestStatus

_MARK = "_uttera_patched"
_ELIGIBLE = "_uttera_decode_shortcut"  # per manager: (req_to_blocks, block_size) or None


def decode_shortcut(manager: KVCacheManager) -> tuple[dict[str, list[Any]], int] | None:
    """(the single group's request-to-blocks map, its block size) if `manager`'s layout allows the
    shortcut, else None. Decided once per manager."""
    cached = manager.__dict__.get(_ELIGIBLE, False)
    if cached is not False:
        return cached  # type: ignore[no-any-return]
    found = None
    coordinator = manager.coordinator
    managers: Sequence[Any] = coordinator.single_type_managers
    group = managers[0] if len(managers) == 1 else None
    if (
        group is not None
        and type(group) is FullAttentionManager
        and not group.enable_caching
        and not manager.enable_caching
        and group.dcp_world_size == 1
        and group.pcp_world_size == 1
    ):
        found = (group.req_to_blocks, group.block_size)
    manager.__dict__[_ELIGIBLE] = found
    return found


_stock: Any = None  # vLLM's method once patched, called (by module lookup) for everything the shortcut leaves


def stock_allocate_slots() -> Any:
    """vLLM's own `KVCacheManager.allocate_slots` (before or after `patch()`)."""
    return _stock or KVCacheManager.allocate_slots


def patch() -> None:
    global _stock
    if getattr(KVCacheManager, _MARK, False):
        return
    _stock = KVCacheManager.allocate_slots

    def allocate_slots(
        self: KVCacheManager,
        request: Request,
        num_new_tokens: int,
        num_new_computed_tokens: int = 0,
        new_computed_blocks: KVCacheBlocks | None = None,
        num_lookahead_tokens: int = 0,
        num_external_computed_tokens: int = 0,
        delay_cache_blocks: bool = False,
        num_encoder_tokens: int = 0,
        full_sequence_must_fit: bool = False,
        reserved_blocks: int = 0,
        has_scheduled_reqs: bool = True,
        skip_zeroing_group_ids: tuple[int, ...] = (),
    ) -> KVCacheBlocks | None:
        if (
            num_new_tokens > 0
            and new_computed_blocks is None
            and not num_new_computed_tokens
            and not num_external_computed_tokens
            and not num_lookahead_tokens
            and not num_encoder_tokens
            and not full_sequence_must_fit
            and not reserved_blocks
            and not delay_cache_blocks
            and request.status == RequestStatus.RUNNING
            and (shortcut := decode_shortcut(self)) is not None
        ):
            blocks = shortcut[0].get(request.request_id)
            if blocks is not None:
                needed = min(min(request.num_computed_tokens, self.max_model_len) + num_new_tokens, self.max_model_len)
                if len(blocks) * shortcut[1] >= needed:
                    return self.empty_kv_cache_blocks
        result: KVCacheBlocks | None = _stock(
            self,
            request,
            num_new_tokens,
            num_new_computed_tokens,
            new_computed_blocks,
            num_lookahead_tokens,
            num_external_computed_tokens,
            delay_cache_blocks,
            num_encoder_tokens,
            full_sequence_must_fit,
            reserved_blocks,
            has_scheduled_reqs,
            skip_zeroing_group_ids,
        )
        return result

    KVCacheManager.allocate_slots = allocate_slots  # type: ignore[method-assign]  # the patch itself
    setattr(KVCacheManager, _MARK, True)
