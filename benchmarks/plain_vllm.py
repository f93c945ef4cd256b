"""Plain-vLLM baseline: engine step time of a stock Llama of the voice's dimensions against ours, one run.

    python -m benchmarks.plain_vllm [--model voices/default] [--server-args "..."] [--rows 16,64,256,1024]
                                    [--steps 300] [--prompt-len 384] [--rounds 2]
                                    [--out benchmarks/results/plain_vllm.json]

Two engines, each a vLLM `AsyncLLM` in its own child process (and its own engine-core process), both
alive for the whole run:
  plain  vLLM's own LlamaForCausalLM with the dimensions of --model's config.json (hidden size, layers,
         heads, KV heads, head dim, intermediate size, vocabulary), random weights written by transformers
         into a temporary directory; the child runs with VLLM_PLUGINS="" (our plugin is not loaded: no
         engine patches, no model registration), no logits processor, `ignore_eos`.
  ours   --model through our engine with the engine arguments `uttera serve --model M --server-args`
         would use (`MelEngine.engine_args()`): the plugin's patches in every vLLM process,
         UtteraTTSForCausalLM with its mel head, the pointer logits processor, greedy, STOP as stop token;
         with `--ours-vocoder engine` (the server's default on CUDA) each request asks for PCM, which the
         vocoder inside the engine's worker sends over the PCM channel (drained here); with `frontend`
         (the default on CPU) every step's mel travels to this process instead. `served` (the default)
         picks what `uttera serve --server-args` would.
Both: those same engine arguments otherwise (dtype: float32 on CPU, the checkpoint's fp16 on CUDA; eager
on CPU; scheduling policy; prefix caching; vLLM's v1 model runner, the one our patches cover), with
max_num_seqs = the largest --rows and a KV cache sized for it; the same seeded prompts (`--prompt-len`
phoneme ids of the voice's map); DELTA outputs consumed by one task per request.

A measurement at R rows submits R requests at once, `max_tokens = steps + 1`, and takes the engine's
step reports (vLLM's stat logger, one per engine step, timed here as the server's `/metrics` step time
is) from the step after every request has its first token to the step before the first request
finishes: pure decode steps at exactly R running rows. `step_ms` is the mean step of that window,
`step_ms_p50` its median (robust to a busy host's stalls).
Rounds alternate the variants' order (plain first, then ours first, ...) within each row count, and a
round's figure per variant is the median over rounds; `ours/plain` is their ratio.
"""

import argparse
import asyncio
import contextlib
import dataclasses
import json
import multiprocessing
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks import machine

ROOT = Path(__file__).resolve().parent.parent

VARIANTS = ("plain", "ours")
LLAMA_KEYS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "rms_norm_eps",
    "rope_theta",
    "max_position_embeddings",
)


def write_plain_llama(voice_config: dict, out: Path, seed: int) -> Path:
    """A stock Llama checkpoint with the voice's dimensions and random weights (fp16) in `out`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        **{k: voice_config[k] for k in LLAMA_KEYS if k in voice_config},
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        torch_dtype="float16",  # type: ignore[call-arg]  # transformers takes it through **kwargs; its signature does not say so
    )
    LlamaForCausalLM(cfg).to(torch.float16).save_pretrained(out)  # type: ignore[arg-type]  # transformers types `to` with a decorator that loses its signature
    return out


def prompts(model_dir: Path, n: int, length: int, seed: int) -> list[list[int]]:
    """`n` prompts of `length` ids: BOS, random phoneme ids (seeded) of the voice's map (phonemes.json; a
    model without one: 3..n_phoneme_tokens-1), EOS."""
    if (model_dir / "phonemes.json").exists():
        id_map = json.loads((model_dir / "phonemes.json").read_text())["phoneme_id_map"]
        ids = sorted({i for v in id_map.values() for i in v if i > 2})
    else:
        ids = list(range(3, json.loads((model_dir / "config.json").read_text())["n_phoneme_tokens"]))
    rng = random.Random(seed)
    return [[1] + [rng.choice(ids) for _ in range(length - 2)] + [2] for _ in range(n)]


def kv_bytes_per_token(c: dict, dtype_bytes: int) -> int:
    head_dim = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    return c["num_hidden_layers"] * 2 * c.get("num_key_value_heads", c["num_attention_heads"]) * head_dim * dtype_bytes


class StepTrace:
    """vLLM stat-logger factory that records (time.perf_counter(), running rows) once per engine step."""

    def __init__(self):
        self.steps: list[tuple[float, int]] = []

    def factory(self):
        from vllm.v1.metrics.loggers import StatLoggerBase

        steps = self.steps

        class _Recorder(StatLoggerBase):
            def __init__(self, vllm_config, engine_index: int = 0):
                pass

            def record(self, scheduler_stats, iteration_stats, mm_cache_stats=None, engine_idx: int = 0):
                if scheduler_stats is not None:
                    steps.append((time.perf_counter(), scheduler_stats.num_running_reqs))

            def log_engine_initialized(self):
                pass

        return _Recorder


async def measure(
    llm, trace: StepTrace, ours: bool, stop_id: int, batch: list[list[int]], steps: int, receiver=None
) -> dict:
    """One measurement at len(batch) rows (see module docstring). `receiver`: the PCM channel's
    PcmReceiver when ours vocodes in the engine; each request's PCM is drained as it arrives."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    from engine_patches.pcm_wire import PCM_ARG, PcmRoute

    base: dict[str, Any] = dict(
        temperature=0.0,
        max_tokens=steps + 1,
        detokenize=False,
        output_kind=RequestOutputKind.DELTA,
        **({"stop_token_ids": [stop_id]} if ours else {"ignore_eos": True}),
    )
    rows, started, marks = len(batch), set(), {}
    samples = [0] * rows
    trace.steps.clear()

    async def drain(i: int, queue: asyncio.Queue) -> None:
        while (pcm := await queue.get()) is not None:
            if isinstance(pcm, BaseException):
                raise pcm
            samples[i] += pcm.shape[0]

    async def one(i: int):
        request_id = uuid.uuid4().hex
        params = SamplingParams(**base)
        drained = None
        if receiver is not None:
            params.extra_args = {PCM_ARG: PcmRoute(receiver.sink, request_id).as_arg()}
            drained = asyncio.ensure_future(drain(i, receiver.open(request_id)))
        try:
            async for out in llm.generate(TokensPrompt(prompt_token_ids=batch[i]), params, request_id):
                if i not in started and out.outputs and out.outputs[0].token_ids:
                    started.add(i)
                    if len(started) == rows:
                        marks["all_started"] = len(trace.steps)
                if out.finished:
                    marks.setdefault("first_done", len(trace.steps))
                    break
            if drained is not None:
                await asyncio.wait_for(drained, 30)
        finally:
            if drained is not None:
                drained.cancel()
                receiver.drop(request_id)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(rows)))
    wall = time.perf_counter() - t0
    a, b = marks.get("all_started", 0) + 1, marks.get("first_done", len(trace.steps)) - 1
    window = trace.steps[a:b]
    if any(r != rows for _, r in window):  # the last reports can already show finished rows
        window = window[: [r for _, r in window].index(next(r for _, r in window if r != rows))]
    if len(window) < 2:
        return {"rows": rows, "steps_measured": 0, "step_ms": None, "wall_s": round(wall, 3)}
    diffs = [y[0] - x[0] for x, y in zip(window, window[1:])]
    ms = 1000 * (window[-1][0] - window[0][0]) / (len(window) - 1)
    return {
        "rows": rows,
        "pcm_samples_min": min(samples) if receiver is not None else None,
        "steps_measured": len(window) - 1,
        "step_ms": round(ms, 4),
        "step_ms_p50": round(1000 * statistics.median(diffs), 4),
        "wall_s": round(wall, 3),
    }


def engine_args(a) -> dict:
    """{variant: AsyncEngineArgs}: ours as the server builds them, plain the same with the stock model."""
    from uttera_server.synthesis.mel_engine import MelEngine
    from uttera_server.model_dir import VoiceModelConfig

    from benchmarks.floor import engine_config

    voice = json.loads((a.model / "config.json").read_text())
    config = engine_config(a.model, a.server_args)
    engine_vocoder = None
    if a.vocoder_process == "engine":
        from engine_patches.engine_vocoder import EngineVocoderConfig
        from uttera_server.synthesis.pcm_receiver import new_sink_base

        a.sink_base = new_sink_base()
        engine_vocoder = EngineVocoderConfig(
            sink_base=a.sink_base,
            chunk_frames=config.vocoder_chunk_frames,
            first_chunk_frames=config.first_chunk_frames,
            cuda_graphs=config.vocoder_cuda_graphs is not False,  # None: on in the engine
            max_utterances=max(a.rows),
        )
    # applies the patches here only
    ours = MelEngine(VoiceModelConfig.load(a.model), config, engine_vocoder=engine_vocoder).engine_args()
    dtype_bytes = 4 if ours.dtype == "float32" else 2
    tokens = max(a.rows) * (a.prompt_len + a.steps + 16)
    ours = dataclasses.replace(
        ours,
        max_num_seqs=max(a.rows),
        max_model_len=a.prompt_len + a.steps + 8,
        # Every row's prompt is prefilled before the first rows finish, also at 1,024 rows (vLLM's 2,048
        # tokens a step took longer than --steps to start them all on the H200): only the measured
        # window's rows matter, and they are pure decode steps either way.
        max_num_batched_tokens=max(ours.max_num_batched_tokens or 2048, 16 * max(a.rows)),
        kv_cache_memory_bytes=int(1.2 * tokens * kv_bytes_per_token(voice, dtype_bytes)) + (64 << 20),
        gpu_memory_utilization=a.gpu_memory_utilization,
    )
    # Stock vLLM: none of what MelEngine adds for the engine vocoder (its config, async scheduling off).
    plain = dataclasses.replace(
        ours, model=str(a.plain_dir), logits_processors=None, additional_config={}, async_scheduling=None
    )
    return {"plain": plain, "ours": ours}


def child(variant: str, args, a, conn) -> None:
    """Host one variant's engine; answer ("run", batch) with a measurement until ("stop",)."""
    os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"
    if variant == "plain":
        os.environ["VLLM_PLUGINS"] = ""  # no uttera plugin in this process or the engine core it spawns
    else:
        import engine_patches

        engine_patches.apply()  # this process (the frontend's output path); the plugin covers the others
    from vllm import ModelRegistry
    from vllm.plugins import load_general_plugins
    from vllm.v1.engine.async_llm import AsyncLLM

    load_general_plugins()  # EngineArgs.__post_init__ does it, but these args were built in the parent
    # The plain variant must run without our plugin, which registers our architecture when it loads.
    plugin = "UtteraTTSForCausalLM" in ModelRegistry.get_supported_archs()
    if plugin != (variant == "ours"):
        raise RuntimeError(f"{variant}: uttera plugin loaded = {plugin}")

    async def serve() -> None:
        trace = StepTrace()
        receiver = None
        if variant == "ours" and a.vocoder_process == "engine":
            from uttera_server.synthesis.pcm_receiver import PcmReceiver

            receiver = PcmReceiver(a.sink_base, 0)  # bound before the engine's worker connects
            receiver.start()
        llm = AsyncLLM.from_engine_args(args, stat_loggers=[trace.factory()])
        try:
            await measure_on_request(llm, trace, variant == "ours", a, conn, receiver)
        finally:
            llm.shutdown()
            if receiver is not None:
                await receiver.close()

    asyncio.run(serve())


async def measure_on_request(llm, trace: StepTrace, ours: bool, a, conn, receiver=None) -> None:
    """Warm up, say "ready", then measure each batch the parent sends until it says stop."""
    stop_id = json.loads((Path(a.model) / "config.json").read_text())["stop_token_id"]
    warm = await measure(llm, trace, ours, stop_id, prompts(Path(a.model), 2, a.prompt_len, a.seed + 1), 8, receiver)
    if receiver is not None and not warm["pcm_samples_min"]:
        raise RuntimeError("the in-engine vocoder sent no PCM for the warm-up requests")
    conn.send(("ready",))
    loop = asyncio.get_running_loop()
    while (msg := await loop.run_in_executor(None, conn.recv))[0] == "run":
        conn.send(await measure(llm, trace, ours, stop_id, msg[1], a.steps, receiver))


def ratio(x, y):
    return None if not x or not y else round(x / y, 3)


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'rows':>5} {'plain ms':>9} {'ours ms':>9} {'ours/plain':>10} {'plain p50':>9} {'ours p50':>9} "
        f"{'p50 ratio':>9} {'plain st/s':>10} {'ours st/s':>9} {'steps':>9}"
    )
    print(head)
    print("-" * len(head))
    f = lambda v, spec=".3f": "-" if v is None else format(v, spec)  # noqa: E731
    for r in rows:
        p, o = r["plain"], r["ours"]
        print(
            f"{r['rows']:>5} {f(p['step_ms']):>9} {f(o['step_ms']):>9} {f(r['ours_over_plain']):>10} "
            f"{f(p['step_ms_p50']):>9} {f(o['step_ms_p50']):>9} {f(r['ours_over_plain_p50']):>9} "
            f"{f(p['step_ms'] and 1000 / p['step_ms'], '.1f'):>10} {f(o['step_ms'] and 1000 / o['step_ms'], '.1f'):>9} "
            f"{p['steps_measured']:>4}/{o['steps_measured']:<4}"
        )
    print(
        "ms = mean engine step at exactly `rows` decoding rows, p50 = median step (each the median over rounds); "
        "st/s = steps per second from the mean; steps = decode steps measured in the shortest round, plain/ours"
    )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default", help="our voice's model directory")
    p.add_argument("--rows", type=lambda s: [int(x) for x in s.split(",")], default=[16, 64, 256, 1024])
    p.add_argument("--steps", type=int, default=300, help="decode steps per request (max_tokens - 1)")
    p.add_argument(
        "--prompt-len",
        type=int,
        default=384,
        help="prompt ids per request: ours must not finish "
        "within --steps (the default voice ran 290 steps on 256 random ids; rows of a large batch also "
        "start decoding over several prefill steps)",
    )
    p.add_argument(
        "--ours-vocoder",
        choices=("served", "engine", "frontend"),
        default="served",
        help="where ours vocodes: in the engine's worker (PCM channel), in this process (mel in every step "
        "output), or as `uttera serve --server-args` would (engine on CUDA, frontend on CPU)",
    )
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--server-args", default="", help="`uttera serve` flags whose engine arguments both use")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3, help="per engine (two are alive)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "plain_vllm.json")
    a = p.parse_args()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.vocoder_process = a.ours_vocoder
    if a.ours_vocoder == "served":
        from uttera_server.synthesis.placement import vocoder_device, vocoder_process

        from benchmarks.floor import engine_config

        config = engine_config(a.model, a.server_args)
        a.vocoder_process = vocoder_process(config.vocoder_process, vocoder_device(config.vocoder_device))
    meta = machine.describe()
    voice = json.loads((a.model / "config.json").read_text())
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="plain-llama-") as tmp:
        a.plain_dir = write_plain_llama(voice, Path(tmp), a.seed)
        args = engine_args(a)
        engines = {}
        for v in VARIANTS:  # one at a time: startups do not overlap
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=child, args=(v, args[v], a, theirs), name=f"plain_vllm-{v}")
            proc.start()
            theirs.close()  # so that recv() fails if the child dies
            try:
                mine.recv()
            except EOFError:
                proc.join()
                raise RuntimeError(f"the {v} engine did not start (exit code {proc.exitcode})") from None
            engines[v] = (proc, mine)
            print(f"{v} engine ready", flush=True)
        runs: dict = {(v, r): [] for v in VARIANTS for r in a.rows}
        try:
            for rnd in range(a.rounds):
                order = VARIANTS if rnd % 2 == 0 else VARIANTS[::-1]
                for r in a.rows:
                    batch = prompts(a.model, r, a.prompt_len, a.seed + 1000 * rnd + r)
                    for v in order:
                        engines[v][1].send(("run", batch))
                        m = engines[v][1].recv()
                        runs[v, r].append(m)
                        print(
                            f"  round {rnd + 1} rows {r} {v}: {m['step_ms']} ms a step over "
                            f"{m['steps_measured']} steps",
                            flush=True,
                        )
        finally:
            for proc, conn in engines.values():
                with contextlib.suppress(OSError):
                    conn.send(("stop",))
                proc.join(120)
                if proc.is_alive():
                    proc.terminate()

    def med(ms: list[dict]) -> dict:
        out = {"steps_measured": min(m["steps_measured"] for m in ms), "rounds": ms}
        for key in ("step_ms", "step_ms_p50"):
            vals = [m[key] for m in ms if m.get(key) is not None]
            out[key] = round(statistics.median(vals), 4) if vals else None
        return out

    table = []
    for r in a.rows:
        row = {"rows": r, "plain": med(runs["plain", r]), "ours": med(runs["ours", r])}
        row["ours_over_plain"] = ratio(row["ours"]["step_ms"], row["plain"]["step_ms"])
        row["ours_over_plain_p50"] = ratio(row["ours"]["step_ms_p50"], row["plain"]["step_ms_p50"])
        table.append(row)
    print_table(table)
    meta["loadavg_end"] = machine.loadavg()
    a.out.write_text(
        json.dumps(
            {
                **meta,
                "model": str(a.model),
                "plain_config": {k: voice.get(k) for k in LLAMA_KEYS},
                "server_args": a.server_args,
                "ours_vocoder": a.vocoder_process,
                "dtype": args["ours"].dtype,
                "enforce_eager": args["ours"].enforce_eager,
                "scheduling_policy": args["ours"].scheduling_policy,
                "steps": a.steps,
                "prompt_len": a.prompt_len,
                "rounds": a.rounds,
                "seed": a.seed,
                "results": table,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
