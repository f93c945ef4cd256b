"""Host time of vLLM's scheduler per decode step, per row: stock `allocate_slots` against the shortcut.

    python -m benchmarks.scheduler_host_overhead [--model DIR] [--rows 256,1024] [--steps 64] [--rounds 5] \\
        [--out benchmarks/results/scheduler_host_overhead.json]

An engine core's step begins with `Scheduler.schedule()` and ends with `Scheduler.update_from_output()`:
both loop over every running row. This builds vLLM 0.32's own `Scheduler` on a KV layout like the
served one (one full-attention group, 16-token blocks, prefix caching off) with `rows` requests decoding,
and times the two calls per step with each `KVCacheManager.allocate_slots` in turn, alternated within each
round: `stock` (vLLM's) and `shortcut` (engine_patches.kv_slots: a decode step that fits in the row's
last block returns at once). No model runs: the sampled token of every row is made up, as the scheduler
never reads it but to append. Median over rounds of the mean over `steps` steps; collector off while timed.
"""

import argparse
import gc
import json
import statistics
import time
from pathlib import Path

import torch
from vllm import SamplingParams
from vllm.engine.arg_utils import EngineArgs
from vllm.v1.core.kv_cache_manager import KVCacheManager
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.config import VllmConfig
from vllm.v1.kv_cache_interface import AttentionSpec, FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
from vllm.v1.outputs import ModelRunnerOutput
from vllm.v1.request import Request
from vllm.v1.structured_output import StructuredOutputManager

from benchmarks import machine
from engine_patches import kv_slots

ROOT = Path(__file__).resolve().parent.parent
BLOCK = 16
MAX_LEN = 2048


def engine_config(model: Path, rows: int, max_len: int = MAX_LEN, batched_tokens: int = 8192) -> VllmConfig:
    """vLLM's config for `model` as the server runs it (no prefix caching, no tokenizer)."""
    args = EngineArgs(
        model=str(model), max_num_seqs=rows, max_num_batched_tokens=max(rows, batched_tokens),
        enable_prefix_caching=False, max_model_len=max_len, skip_tokenizer_init=True,
    )  # fmt: skip
    return args.create_engine_config()


def scheduler(
    config: VllmConfig, num_blocks: int, spec: AttentionSpec | None = None, kind: type[Scheduler] = Scheduler
) -> Scheduler:
    """vLLM's `kind` of scheduler over a pool of `num_blocks` blocks in one KV group (full attention by
    default), no model behind it."""
    config.cache_config.num_gpu_blocks = num_blocks
    spec = spec or FullAttentionSpec(block_size=BLOCK, num_kv_heads=2, head_size=64, dtype=torch.float16)
    kv = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(["l0"], spec)])
    return kind(config, kv, StructuredOutputManager(config), block_size=BLOCK)


def decoding_scheduler(model: Path, rows: int) -> Scheduler:
    """A scheduler with `rows` requests (37-token prompts) admitted and past their prefill."""
    s = scheduler(engine_config(model, rows), rows * MAX_LEN // BLOCK + 16)
    params = SamplingParams(max_tokens=MAX_LEN - 64, ignore_eos=True)
    for i in range(rows):
        s.add_request(Request(f"r{i}", list(range(3, 40)), params, None))
    for _ in range(4):
        step(s)
    return s


def step(s: Scheduler) -> None:
    out = s.schedule()
    ids = list(out.num_scheduled_tokens)
    s.update_from_output(
        out,
        ModelRunnerOutput(
            req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)}, sampled_token_ids=[[5]] * len(ids)
        ),  # fmt: skip
    )


def timed(s: Scheduler, steps: int) -> float:
    """Mean seconds per step over `steps` steps, the collector off."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(steps):
            step(s)
        return (time.perf_counter() - t0) / steps
    finally:
        gc.enable()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default", help="a voice directory (its config)")
    p.add_argument("--rows", default="256,1024")
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "scheduler_host_overhead.json")
    a = p.parse_args()
    kv_slots.patch()
    variants = {"stock": kv_slots.stock_allocate_slots(), "shortcut": KVCacheManager.allocate_slots}
    table = []
    print(f"{'rows':>6} {'stock us/row':>13} {'shortcut us/row':>16} {'ratio':>6}")
    try:
        for rows in (int(r) for r in a.rows.split(",")):
            s = decoding_scheduler(a.model, rows)
            times: dict[str, list[float]] = {v: [] for v in variants}
            for round_ in range(a.rounds):
                for name in variants if round_ % 2 == 0 else list(variants)[::-1]:
                    KVCacheManager.allocate_slots = variants[name]  # type: ignore[method-assign]
                    times[name].append(timed(s, a.steps))
            before, now = (1e6 * statistics.median(times[v]) / rows for v in variants)
            table.append({"rows": rows, "stock_us_per_row": round(before, 2), "shortcut_us_per_row": round(now, 2)})
            print(f"{rows:>6} {before:>13.2f} {now:>16.2f} {before / now:>6.2f}")
    finally:
        KVCacheManager.allocate_slots = variants["shortcut"]  # type: ignore[method-assign]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"command": machine.command(), "machine": machine.describe(), "steps": a.steps, "rounds": a.rounds,
           "levels": table}  # fmt: skip
    a.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
