"""Baselines against our streaming pipeline, in one process, same weights, same texts, same run.

    python -m benchmarks.baselines [--model voices/default] [--server-args "..."] [--device cpu|cuda]
                                   [--concurrency 1,8] [--duration 30] [--rounds 3] [--variants d,b,a,c]
                                   [--seed 0]
                                   [--out benchmarks/results/baselines.json]

  (a) sequential: no vLLM. One worker thread serves requests one after another (FIFO): per sentence a
      plain PyTorch greedy loop with a KV cache (torch_tts.py, same pointer rules), then the offline
      vocoder on the whole sentence. Same dtype as the engine; on CPU one torch thread, like the vLLM
      CPU worker (it binds one core and reserves the other).
  (b) engine, vocode after: the patched engine (MelEngine, continuous batching) generates each sentence
      to the end, then `Vocoder.forward` runs once on its mel (one vocoder thread, like the server's);
      the next sentence starts while the previous one is vocoded, as in the Synthesizer.
  (c) CUDA only: (d) with the vocoder on the serving process's default CUDA stream instead of its own.
      vLLM runs the LM in the engine-core process, so the LM's own CUDA stream cannot be shared from here;
      this is the closest in-process variant, and "n/a on CPU" on a CPU run.
  (d) ours: `Synthesizer.stream` (streaming, vocoding batched across utterances by the VocoderWorker; on
      CUDA on the vocoder's own CUDA stream, as the server runs it).
  (e) engine only: the engine's mel, no vocoder at all (TTFA = first mel step; "audio" = mel frames x
      hop). Not a baseline: the reference for the LM step-time inflation that vocoding causes.

Every row also has the engine's mean step time under load during that variant (`step_ms_mean`, from
the engine's step reports) and, beside (d) and (c), its ratio to (e) (`step_vs_e`). `--timeline` also
records engine step reports and vocoder batches during one short (d) run at the highest C and draws
them (PNG next to --out).

For each variant and concurrency C (closed loop, C clients back to back for --duration s in total, the
text mix of texts.py; the duration is split into --rounds rounds that cycle through the variants, with
the same texts for every variant of a round): TTFA p50/p99 (first audio of a request: for (a) and (b) the first sentence's audio),
audio-seconds per second, underruns; and ratios to (d) at the same C. No HTTP: these compare the
synthesis pipelines; load.py measures the server.

On --device cuda the vocoders of all variants run on the GPU (the Synthesizer puts (d)'s there itself,
`--vocoder-device auto`).
"""

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import time
from pathlib import Path

from benchmarks import machine
from benchmarks.floor import engine_config
from benchmarks.loop import closed_loop
from benchmarks.playback import RequestRecord
from benchmarks.stats import by_kind, summarize

ROOT = Path(__file__).resolve().parent.parent

NAMES = {
    "a": "a sequential PyTorch, no vLLM",
    "b": "b engine, vocode after",
    "c": "c vocoder on default CUDA stream",
    "d": "d ours (streaming, batched)",
    "e": "e engine only, no vocoder",
}


def single_thread_pool(name: str, device: str) -> concurrent.futures.ThreadPoolExecutor:
    def init():
        import torch

        if device == "cpu":
            torch.set_num_threads(1)  # per thread under OpenMP (tests/vocoder/test_threads.py)

    return concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=name, initializer=init)


class Pipelines:
    """Everything the variants share: the Synthesizer (its engine serves (b) too), vocoders, pools."""

    def __init__(self, a):
        self.args = a
        self.device = a.device

    async def start(self) -> None:
        import torch

        from uttera_server.synthesis.synthesizer import Synthesizer
        from vocoder.model import Vocoder

        a = self.args
        self.cfg = engine_config(a.model, a.server_args)
        self.synth = Synthesizer(a.model, self.cfg)
        await self.synth.start()
        self.engine = self.synth._engine  # (b) shares (d)'s engine: one engine start, same weights
        self.model = self.synth.model
        assert self.engine._llm is not None  # started
        self.engine_dtype = self.engine._llm.model_config.dtype
        self.vocoder = Vocoder.from_dir(a.model / "vocoder", device=self.device)
        self.voc_pool = single_thread_pool("vocode-after", self.device)
        self.seq_pool = single_thread_pool("sequential", self.device)
        self.torch_tts = None
        if "a" in a.variants:
            from benchmarks.torch_tts import TorchTTS

            self.torch_tts = TorchTTS(a.model, device=self.device, dtype=self.engine_dtype)
        worker = self.synth.vocoder_worker
        assert worker is not None  # the Synthesizer's own VocoderWorker (vocoder_process="frontend")
        self.workers = {"d": worker}
        if self.device == "cuda":
            if self.synth.vocoder_device != "cuda":
                raise SystemExit(f"--device cuda: the Synthesizer's vocoder is on {self.synth.vocoder_device}")
            self.workers["c"] = self._cuda_worker(own_cuda_stream=False)
        self.synth._stage.worker = self.workers["d"]
        torch.manual_seed(a.seed)

    def _cuda_worker(self, own_cuda_stream: bool):
        import torch

        from uttera_server.synthesis.vocoder_worker import VocoderWorker
        from vocoder.model import Vocoder
        from vocoder.streaming import StreamingVocoder

        sv = StreamingVocoder(
            Vocoder.from_dir(self.args.model / "vocoder"),
            chunk_frames=self.cfg.vocoder_chunk_frames,
            first_chunk_frames=self.cfg.first_chunk_frames,
            device="cuda",
        )
        if not own_cuda_stream:
            sv._cuda_stream = torch.cuda.default_stream(sv.device)  # (c): serialised with default-CUDA-stream work
        return VocoderWorker(sv, deadline_first=self.cfg.scheduling == "deadline", driver=self.cfg.vocoder_driver)

    async def close(self) -> None:
        if "c" in self.workers:
            self.workers["c"].close()
        self.synth._stage.worker = self.workers["d"]
        self.voc_pool.shutdown()
        self.seq_pool.shutdown()
        await self.synth.close()

    def sentences(self, text: str):
        from uttera_server.frontend import prepare

        return prepare(text, max_phonemes=min(self.model.max_phonemes, 400))

    # --- one request per variant ---
    async def request_d(self, text: str, kind: str, name: str = "d") -> RequestRecord:
        from uttera_server.synthesis import AudioChunk

        rec = RequestRecord(name, kind, len(text), time.perf_counter(), self.model.sample_rate)
        try:
            async for item in self.synth.stream(text):
                if isinstance(item, AudioChunk):
                    rec.add(time.perf_counter(), item.pcm.shape[0])
            rec.t_done = time.perf_counter()
        except Exception as e:
            rec.error = f"exc_{type(e).__name__}"
        return rec

    def _vocode(self, mel):
        """Offline vocoder on one sentence: (T, n_mels) numpy/tensor -> PCM samples."""
        import torch

        with torch.inference_mode():
            x = torch.as_tensor(mel).T.unsqueeze(0).to(self.device)
            return self.vocoder(x)[0].cpu().numpy()

    async def request_b(self, text: str, kind: str) -> RequestRecord:
        import numpy as np

        loop = asyncio.get_running_loop()
        rec = RequestRecord("b", kind, len(text), time.perf_counter(), self.model.sample_rate)
        pending: asyncio.Queue = asyncio.Queue()

        async def deliver():
            while (fut := await pending.get()) is not None:
                pcm = await fut
                rec.add(time.perf_counter(), pcm.shape[0])

        consumer = asyncio.create_task(deliver())
        try:
            for sentence in self.sentences(text):
                steps = [s.mel async for s in self.engine.generate(sentence.phoneme_ids) if s.mel is not None]
                pending.put_nowait(loop.run_in_executor(self.voc_pool, self._vocode, np.concatenate(steps)))
            pending.put_nowait(None)
            await consumer
            rec.t_done = time.perf_counter()
        except Exception as e:
            consumer.cancel()
            rec.error = f"exc_{type(e).__name__}"
        return rec

    async def request_e(self, text: str, kind: str) -> RequestRecord:
        rec = RequestRecord("e", kind, len(text), time.perf_counter(), self.model.sample_rate)
        try:
            for sentence in self.sentences(text):
                async for step in self.engine.generate(sentence.phoneme_ids):
                    assert step.mel is not None  # a plain request: mel, not PCM
                    rec.add(time.perf_counter(), step.mel.shape[0] * self.model.hop_length)
            rec.t_done = time.perf_counter()
        except Exception as e:
            rec.error = f"exc_{type(e).__name__}"
        return rec

    def _sequential(self, rec: RequestRecord, text: str) -> None:
        for sentence in self.sentences(text):
            assert self.torch_tts is not None  # made when variant "a" runs
            pcm = self._vocode(self.torch_tts.generate(sentence.phoneme_ids))
            rec.add(time.perf_counter(), pcm.shape[0])

    async def request_a(self, text: str, kind: str) -> RequestRecord:
        rec = RequestRecord("a", kind, len(text), time.perf_counter(), self.model.sample_rate)
        try:
            await asyncio.get_running_loop().run_in_executor(self.seq_pool, self._sequential, rec, text)
            rec.t_done = time.perf_counter()
        except Exception as e:
            rec.error = f"exc_{type(e).__name__}"
        return rec

    def session_factory(self, variant: str):
        fn = {
            "a": self.request_a,
            "b": self.request_b,
            "e": self.request_e,
            "c": lambda t, k: self.request_d(t, k, "c"),
            "d": self.request_d,
        }[variant]

        class Session:
            request = staticmethod(fn)

        @contextlib.asynccontextmanager
        async def open_session(_i):
            yield Session()

        return open_session


async def record_timeline(p: Pipelines, c: int, a, seconds: float = 4.0) -> dict:
    """(d) at concurrency c for `seconds`: engine step reports and vocoder batches, drawn to a PNG."""
    worker, stats = p.workers["d"], p.engine.stats
    p.synth._stage.worker = worker
    worker.trace, stats.step_trace = [], []
    await closed_loop(p.session_factory("d"), c, seconds, a.seed + 1)
    batches, steps = worker.trace, stats.step_trace
    worker.trace = stats.step_trace = None
    if not steps or not batches:
        return {"note": "nothing recorded"}
    t0 = steps[len(steps) // 2]  # a window in the middle of the run
    window = (t0, t0 + 0.5)
    png = a.out.with_suffix(".timeline.png")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 2.6))
    for t in steps:
        if window[0] <= t <= window[1]:
            ax.axvline(1000 * (t - t0), ymin=0.55, ymax=0.95, color="tab:blue", lw=1)
    for b0, b1, n in batches:
        if b1 >= window[0] and b0 <= window[1]:
            ax.broken_barh([(1000 * (b0 - t0), 1000 * (b1 - b0))], (0.05, 0.4), color="tab:orange")
    ax.set_ylim(0, 1)
    ax.set_yticks([0.25, 0.75], [f"vocoder batches ({p.synth.vocoder_device})", "engine step reports"])
    ax.set_xlabel(f"ms (C = {c}, variant d)")
    ax.set_xlim(0, 1000 * (window[1] - window[0]))
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    in_window = [(b0, b1, n) for b0, b1, n in batches if window[0] <= b0 <= window[1]]
    gaps = [1000 * (b - a_) for a_, b in zip(steps, steps[1:])]
    gaps.sort()
    busy = sum(b1 - b0 for b0, b1, _ in batches) / max(steps[-1] - steps[0], 1e-9)
    return {
        "png": str(png.name),
        "concurrency": c,
        "steps": len(steps),
        "vocoder_batches": len(batches),
        "vocoder_busy_fraction": round(busy, 3),
        "step_gap_ms_p50": round(gaps[len(gaps) // 2], 3),
        "step_gap_ms_p99": round(gaps[int(0.99 * (len(gaps) - 1))], 3),
        "batches_in_window": len(in_window),
        "mean_streams_per_batch": round(sum(n for *_, n in batches) / len(batches), 2),
    }


async def run(a) -> tuple[list[dict], dict]:
    p = Pipelines(a)
    await p.start()
    rows = []
    info: dict = {}
    try:
        for variant in a.variants:  # warm-up, not recorded
            if variant == "c" and a.device != "cuda":
                continue
            if variant in "cd" and a.device == "cuda":
                p.synth._stage.worker = p.workers[variant]
            async with p.session_factory(variant)(0) as s:
                for text in ("Warm up.", "A short warm up sentence, with a clause."):
                    await s.request(text, "warmup")
        for c in a.concurrency:
            records: dict = {v: [] for v in a.variants}
            walls = {v: 0.0 for v in a.variants}
            steps = {v: [0, 0.0] for v in a.variants}  # engine busy steps, their seconds
            for r in range(a.rounds):  # variants interleaved, so drifting machine load hits all alike
                for variant in a.variants:
                    if variant == "c" and a.device != "cuda":
                        continue
                    if variant in "cd" and a.device == "cuda":
                        p.synth._stage.worker = p.workers[variant]
                    st = p.engine.stats
                    n0, s0 = st.busy_steps, st.busy_step_s
                    recs, wall, _ = await closed_loop(
                        p.session_factory(variant), c, a.duration / a.rounds, a.seed + 7919 * r
                    )
                    steps[variant][0] += st.busy_steps - n0
                    steps[variant][1] += st.busy_step_s - s0
                    records[variant] += recs
                    walls[variant] += wall
            for variant in a.variants:
                if variant == "c" and a.device != "cuda":
                    print(f"  {NAMES['c']}: n/a on CPU", flush=True)
                    rows.append({"variant": "c", "concurrency": c, "na": "n/a on CPU"})
                    continue
                recs = records[variant]
                n, secs = steps[variant]
                row = {
                    "variant": variant,
                    "concurrency": c,
                    **summarize(recs, walls[variant]),
                    "by_kind": by_kind(recs),
                    "step_ms_mean": round(1000 * secs / n, 3) if n and variant != "a" else None,
                    "loadavg_end": machine.loadavg(),
                }
                rows.append(row)
                print(
                    f"  {NAMES[variant]} C={c}: TTFA p50 {row['ttfa_ms_p50']} ms p99 {row['ttfa_ms_p99']} ms, "
                    f"{row['audio_s_per_s']} audio-s/s, underruns {row['underruns']}, errors {row['errors']}, "
                    f"step {row['step_ms_mean']} ms",
                    flush=True,
                )
        if a.timeline:
            info["timeline"] = await record_timeline(p, max(a.concurrency), a)
    finally:
        info.update(
            {
                "engine_dtype": str(getattr(p, "engine_dtype", "?")).removeprefix("torch."),
                "engine_config": repr(getattr(p, "cfg", None)),
                "vocoder_device": getattr(p.synth, "vocoder_device", "?") if hasattr(p, "synth") else "?",
            }
        )
        await p.close()
    add_ratios(rows)
    return rows, info


def add_ratios(rows: list[dict]) -> None:
    ours = {r["concurrency"]: r for r in rows if r["variant"] == "d" and "na" not in r}
    bare = {r["concurrency"]: r for r in rows if r["variant"] == "e" and "na" not in r}
    for r in rows:
        e = bare.get(r["concurrency"])
        if (
            "na" not in r
            and e is not None
            and r["variant"] in "bcd"
            and r.get("step_ms_mean")
            and e.get("step_ms_mean")
        ):
            r["step_vs_e"] = round(r["step_ms_mean"] / e["step_ms_mean"], 3)
        d = ours.get(r["concurrency"])
        if "na" in r or d is None:
            continue
        for key in ("ttfa_ms_p50", "ttfa_ms_p99", "audio_s_per_s"):
            r[f"{key}_vs_d"] = round(r[key] / d[key], 2) if r[key] is not None and d[key] else None


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'variant':<32} {'C':>3} {'req':>4} {'TTFA50':>8} {'TTFA99':>8} {'aud/s':>6} {'undr':>5} "
        f"{'50 vs d':>8} {'99 vs d':>8} {'aud/s vs d':>10} {'step ms':>8} {'step vs e':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        if "na" in r:
            print(f"{NAMES[r['variant']]:<32} {r['concurrency']:>3} {r['na']}")
            continue
        f = lambda v, s=".1f": "-" if v is None else format(v, s)  # noqa: E731
        print(
            f"{NAMES[r['variant']]:<32} {r['concurrency']:>3} {r['requests']:>4} {f(r['ttfa_ms_p50']):>8} "
            f"{f(r['ttfa_ms_p99']):>8} {f(r['audio_s_per_s'], '.2f'):>6} {r['underruns']:>5} "
            f"{f(r.get('ttfa_ms_p50_vs_d'), '.2f'):>8} {f(r.get('ttfa_ms_p99_vs_d'), '.2f'):>8} "
            f"{f(r.get('audio_s_per_s_vs_d'), '.2f'):>10} {f(r.get('step_ms_mean'), '.2f'):>8} "
            f"{f(r.get('step_vs_e'), '.3f'):>9}"
        )
    print(
        "TTFA in ms (first audio of a request); aud/s = audio seconds per second; undr = playback underruns; "
        "'vs d' = ratio to (d) at the same C (TTFA: lower is better; aud/s: higher is better); step = engine "
        "step time under load; 'step vs e' = LM step-time inflation against the engine alone"
    )


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    p.add_argument("--model", type=Path, default=ROOT / "voices" / "default")
    p.add_argument("--server-args", default="", help="`uttera serve` engine flags, one string")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--concurrency", default="1,8", help="comma-separated")
    p.add_argument("--duration", type=float, default=30.0, help="seconds each (variant, C) sends new requests")
    p.add_argument("--rounds", type=int, default=3, help="split --duration into this many interleaved rounds")
    p.add_argument("--variants", default="d,b,a,c,e", help="subset and order of a,b,c,d,e")
    p.add_argument("--timeline", action="store_true", help="also record and draw a (d) timeline at the highest C")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "baselines.json")
    a = p.parse_args()
    a.concurrency = [int(x) for x in a.concurrency.split(",")]
    a.variants = [v.strip() for v in a.variants.split(",")]
    if set(a.variants) - set(NAMES):
        p.error(f"--variants must be among {','.join(NAMES)}")
    meta = machine.describe()
    rows, info = asyncio.run(run(a))
    print_table(rows)
    meta["loadavg_end"] = machine.loadavg()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(
        json.dumps(
            {
                **meta,
                "model": str(a.model),
                "server_args": a.server_args,
                "device": a.device,
                "duration_s": a.duration,
                "rounds": a.rounds,
                "seed": a.seed,
                **info,
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
