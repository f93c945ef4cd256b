"""engine_patches.kv_slots: the decode shortcut of `KVCacheManager.allocate_slots` gives the stock answer.

Two vLLM schedulers, one calling the stock method and one the patched, are driven by the same random
workload (arrivals, steps, stops, aborts) on a KV pool small enough to preempt; every step's scheduler
output (rows, tokens, new block ids, preemptions) and the pool's free blocks must be equal. The shortcut
must also be taken (most decode steps) and refused where the layout is not the one it knows.
"""

import random

import pytest
import torch
from vllm import SamplingParams
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.kv_cache_interface import SlidingWindowSpec
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request, RequestStatus

from benchmarks import scheduler_host_overhead
from engine_patches import kv_slots

scheduler = scheduler_host_overhead.scheduler
BLOCK = scheduler_host_overhead.BLOCK


@pytest.fixture(scope="module")
def engine_config(tiny_model_dir):
    return scheduler_host_overhead.engine_config(tiny_model_dir, rows=32, max_len=512, batched_tokens=512)


def snapshot(out) -> tuple:
    new = sorted((r.req_id, tuple(map(tuple, r.block_ids))) for r in out.scheduled_new_reqs)
    cached = out.scheduled_cached_reqs
    blocks = sorted(
        (rid, None if b is None else tuple(map(tuple, b))) for rid, b in zip(cached.req_ids, cached.new_block_ids)
    )
    return (
        tuple(sorted(out.num_scheduled_tokens.items())),
        tuple(new),
        tuple(blocks),
        tuple(sorted(cached.resumed_req_ids)),
        tuple(sorted(getattr(out, "preempted_req_ids", None) or ())),
    )


def counting(fn, counts: dict[str, int]):
    """`fn` as a method that counts its calls and those answered with the empty blocks (the shortcut's)."""

    def allocate_slots(manager, *args, **kwargs):
        result = fn(manager, *args, **kwargs)
        counts["calls"] += 1
        counts["empty"] += result is manager.empty_kv_cache_blocks
        return result

    return allocate_slots


def drive(s: Scheduler, allocate, seed: int, steps: int, depth: int = 1) -> list:
    """The same workload on `s` for a given seed, with `allocate` as `KVCacheManager.allocate_slots`.
    `depth` 2: a step is scheduled before the previous one's output comes back (vLLM's async scheduling)."""
    rng = random.Random(seed)
    trace, n, pending = [], 0, []
    original = KVCacheManager.allocate_slots
    KVCacheManager.allocate_slots = allocate  # type: ignore[method-assign]  # the variant under test
    try:
        for _ in range(steps):
            for _ in range(rng.choice((0, 0, 1, 3))):
                prompt = [rng.randrange(3, 60) for _ in range(rng.randrange(1, 70))]
                params = SamplingParams(max_tokens=rng.randrange(1, 120), ignore_eos=True)
                s.add_request(Request(f"r{n}", prompt, params, None))
                n += 1
            if s.running and rng.random() < 0.05:
                s.finish_requests(rng.choice(s.running).request_id, RequestStatus.FINISHED_ABORTED)
            pending.append(out := s.schedule())
            trace.append((snapshot(out), s.kv_cache_manager.block_pool.get_num_free_blocks()))
            if len(pending) < depth:
                continue
            out = pending.pop(0)
            ids = list(out.num_scheduled_tokens)
            sampled = [[rng.randrange(3, 60)] for _ in ids]  # a prefill chunk's sample is dropped by vLLM
            s.update_from_output(
                out,
                ModelRunnerOutput(
                    req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)}, sampled_token_ids=sampled
                ),  # fmt: skip
            )
    finally:
        KVCacheManager.allocate_slots = original  # type: ignore[method-assign]
    return trace


@pytest.mark.parametrize(
    "seed,num_blocks,kind", [(0, 400, Scheduler), (1, 60, Scheduler), (2, 40, Scheduler), (3, 60, AsyncScheduler)]
)
def test_the_shortcut_schedules_exactly_as_stock(engine_config, seed, num_blocks, kind, monkeypatch):
    kv_slots.patch()
    stock = kv_slots.stock_allocate_slots()
    assert KVCacheManager.allocate_slots is not stock
    stock_counts, patched_counts = {"calls": 0, "empty": 0}, {"calls": 0, "empty": 0}
    depth = 2 if kind is AsyncScheduler else 1
    a = drive(scheduler(engine_config, num_blocks, kind=kind), counting(stock, stock_counts), seed, 300, depth)
    fell_through = {"calls": 0, "empty": 0}  # the patched method's calls of the stock one
    monkeypatch.setattr(kv_slots, "_stock", counting(stock, fell_through))
    patched = counting(KVCacheManager.allocate_slots, patched_counts)
    b = drive(scheduler(engine_config, num_blocks, kind=kind), patched, seed, 300, depth)
    assert a == b
    assert stock_counts == patched_counts  # the same calls, the same ones answered with no block
    assert patched_counts["empty"] > 0.8 * patched_counts["calls"]  # mostly decode steps inside a block
    assert fell_through["empty"] == 0  # every step that needed no block was answered by the shortcut
    assert fell_through["calls"] == patched_counts["calls"] - patched_counts["empty"]
    if num_blocks <= 60:  # the small pools preempted (a preempted row is resumed later)
        assert any(step[0][3] for step in a)


def test_the_shortcut_leaves_other_layouts_to_stock(engine_config):
    kv_slots.patch()
    full = scheduler(engine_config, 100)
    assert kv_slots.decode_shortcut(full.kv_cache_manager) is not None
    window = SlidingWindowSpec(block_size=BLOCK, num_kv_heads=2, head_size=64, dtype=torch.float16, sliding_window=32)
    engine_config.model_config.hf_text_config.sliding_window = 32  # a sliding-window model frees old blocks
    try:
        windowed = scheduler(engine_config, 100, spec=window)
    finally:
        engine_config.model_config.hf_text_config.sliding_window = None
    assert kv_slots.decode_shortcut(windowed.kv_cache_manager) is None
