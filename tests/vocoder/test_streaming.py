"""The key vocoder property: chunked streaming output == offline `Vocoder.forward`, exact length."""

import numpy as np
import pytest
import torch
from tests.vocoder.voc_helpers import offline, random_mel, snr_db, tiny_config

from vocoder.config import VocoderConfig
from vocoder.errors import FrameShapeError, UtteranceStateError, UnknownUtteranceError, VocoderConfigError
from vocoder.model import Vocoder
from vocoder.streaming import StreamingVocoder

MIN_SNR_DB = 80.0  # float32 rounding gives ~120 dB; any logic slip gives < 60 dB


def drive(sv: StreamingVocoder, mels: dict, rng: np.random.Generator, max_push: int = 9, p_push: float = 0.6) -> dict:
    """Push random-sized pieces of every utterance in interleaved batched steps, then finish all."""
    for uid in mels:
        sv.open(uid)
    outs: dict = {uid: [] for uid in mels}
    pos = dict.fromkeys(mels, 0)
    while any(pos[s] < len(m) for s, m in mels.items()):
        batch, finish = {}, []
        for uid, mel in mels.items():
            if pos[uid] < len(mel) and rng.random() < p_push:
                k = int(rng.integers(0, max_push + 1))
                batch[uid] = mel[pos[uid] : pos[uid] + k]
                pos[uid] += len(batch[uid])
                if pos[uid] == len(mel) and rng.random() < 0.5:
                    finish.append(uid)  # finish in the same step as the last frames
        for uid, pcm in sv.step(batch, finish=finish).items():
            assert pcm.dtype == np.float32 and pcm.ndim == 1
            outs[uid].append(pcm)
    rest = [uid for uid in mels if sv.is_open(uid)]
    for uid, pcm in sv.step({}, finish=rest).items():
        outs[uid].append(pcm)
    assert sv.active == []
    return {uid: np.concatenate(chunks) for uid, chunks in outs.items()}


@pytest.mark.parametrize("lookahead", [0, 1, 2])
@pytest.mark.parametrize("chunk, first", [(1, 1), (4, 4), (16, 4), (7, 2), (32, 1)])
def test_utterances_equal_offline(lookahead, chunk, first, rng):
    model = Vocoder.random(tiny_config(lookahead=lookahead), seed=lookahead)
    mels = {f"s{i}": random_mel(rng, n) for i, n in enumerate([1, 2, 5, 23, 64, 97])}
    with StreamingVocoder(model, chunk_frames=chunk, first_chunk_frames=first, initial_capacity=2) as sv:
        got = drive(sv, mels, rng)
    for uid, mel in mels.items():
        ref = offline(model, mel)
        assert got[uid].shape == ref.shape == (len(mel) * 256,), uid
        assert snr_db(ref, got[uid]) > MIN_SNR_DB, uid


def test_default_size_vocoder_utterances_equal_offline(rng):
    model = Vocoder.random(VocoderConfig(), seed=0)
    mels = {0: random_mel(rng, 70), 1: random_mel(rng, 41)}
    with StreamingVocoder(model, chunk_frames=16, first_chunk_frames=4) as sv:
        got = drive(sv, mels, rng, max_push=4, p_push=1.0)
    for uid, mel in mels.items():
        ref = offline(model, mel)
        assert got[uid].shape == ref.shape
        assert snr_db(ref, got[uid]) > MIN_SNR_DB


@pytest.mark.parametrize("lookahead", [0, 1, 2])
def test_latency_samples_emitted_per_push(lookahead, rng):
    """After n frames, exactly max(0, (n - lookahead) * hop - 384) samples are out."""
    model = Vocoder.random(tiny_config(lookahead=lookahead), seed=0)
    sv = StreamingVocoder(model, chunk_frames=8, first_chunk_frames=4)
    assert sv.lag_samples == lookahead * 256 + 384
    mel = random_mel(rng, 30)
    sv.open("a")
    total, fed = 0, 0
    for k in (4, 3, 5, 8, 6):
        total += len(sv.push("a", mel[fed : fed + k]))
        fed += k
        vocoded = fed - sv.pending_frames("a")
        assert total == max(0, (vocoded - lookahead) * 256 - 384)
    assert vocoded < fed  # the last push was below the chunk size and waits
    total += len(sv.finish("a"))
    assert total == fed * 256


def test_first_chunk_policy(tiny_vocoder, rng):
    sv = StreamingVocoder(tiny_vocoder, chunk_frames=16, first_chunk_frames=4)
    sv.open("a")
    assert len(sv.push("a", random_mel(rng, 3))) == 0 and sv.pending_frames("a") == 3
    assert len(sv.push("a", random_mel(rng, 1))) == 4 * 256 - 2 * 256 - 384  # 128 samples
    assert sv.pending_frames("a") == 0
    # Later chunks are as long as what was vocoded before them (4, 8, 16), capped at chunk_frames.
    for size in (4, 8, 16, 16):
        assert len(sv.push("a", random_mel(rng, size - 1))) == 0 and sv.pending_frames("a") == size - 1
        assert len(sv.push("a", random_mel(rng, 1))) == size * 256


def test_ids_are_reusable_and_lifecycle_errors(tiny_vocoder, rng):
    sv = StreamingVocoder(tiny_vocoder)
    with pytest.raises(UnknownUtteranceError, match="call open"):
        sv.push("x", random_mel(rng, 4))
    sv.open("x")
    with pytest.raises(UtteranceStateError, match="already open"):
        sv.open("x")
    mel = random_mel(rng, 10)
    first = np.concatenate([sv.push("x", mel), sv.finish("x")])
    with pytest.raises(UnknownUtteranceError):
        sv.finish("x")
    sv.open("x")  # a finished id starts afresh
    again = np.concatenate([sv.push("x", mel), sv.finish("x")])
    assert np.array_equal(first, again)
    sv.open("empty")
    assert sv.finish("empty").shape == (0,)


def test_bad_frames_raise_before_any_state_changes(tiny_vocoder, rng):
    sv = StreamingVocoder(tiny_vocoder, first_chunk_frames=1)
    sv.open("a")
    sv.open("b")
    with pytest.raises(FrameShapeError, match=r"\(k, 80\)"):
        sv.step({"a": random_mel(rng, 3), "b": random_mel(rng, 3, n_mels=40)})
    with pytest.raises(FrameShapeError, match="floating point"):
        sv.step({"a": np.zeros((3, 80), dtype=np.int64)})
    with pytest.raises(UnknownUtteranceError):
        sv.step({"a": random_mel(rng, 3)}, finish=["nope"])
    assert sv.pending_frames("a") == 0 and sv.pending_frames("b") == 0
    with pytest.raises(VocoderConfigError):
        StreamingVocoder(tiny_vocoder, chunk_frames=0)


def test_context_managers_cancel_open_utterances(tiny_vocoder, rng):
    with StreamingVocoder(tiny_vocoder) as sv:
        with sv.utterance("a"):
            sv.push("a", random_mel(rng, 2))
            assert sv.active == ["a"]
        assert sv.active == []
        with sv.utterance("b"):
            sv.finish("b")
        sv.open("c")
        sv.open("d")
        sv.cancel("d")
        assert sv.active == ["c"]
    assert sv.active == []


def test_step_returns_every_named_utterance_and_accepts_tensors(tiny_vocoder, rng):
    sv = StreamingVocoder(tiny_vocoder, chunk_frames=8, first_chunk_frames=8)
    for uid in "abc":
        sv.open(uid)
    out = sv.step({"a": torch.from_numpy(random_mel(rng, 8)), "b": random_mel(rng, 2)}, finish=["c"])
    assert set(out) == {"a", "b", "c"}
    assert len(out["a"]) > 0 and len(out["b"]) == 0 and len(out["c"]) == 0
    result = sv.submit({"b": random_mel(rng, 6).astype(np.float64)})
    assert result.done() and len(result.wait()["b"]) > 0


@pytest.fixture
def no_tf32():
    """TF32 convs/matmuls round to ~1e-3 (streaming vs offline then reads ~70 dB): test in fp32."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_stream_matches_cpu_offline(rng, no_tf32):
    model = Vocoder.random(tiny_config(lookahead=2), seed=0)
    mels = {i: random_mel(rng, n) for i, n in enumerate([3, 40, 77])}
    refs = {uid: offline(model, mel) for uid, mel in mels.items()}
    producer = torch.cuda.Stream()
    with StreamingVocoder(model, chunk_frames=8, first_chunk_frames=4, device="cuda") as sv:
        for uid in mels:
            sv.open(uid)
        outs = {uid: [] for uid in mels}
        for t in range(0, 80, 4):
            with torch.cuda.stream(producer):  # the "LM" writes mel on its own CUDA stream
                batch = {uid: torch.from_numpy(m[t : t + 4]).cuda() * 1.0 for uid, m in mels.items() if t < len(m)}
                ready = torch.cuda.Event()
                ready.record(producer)
            result = sv.submit(batch, finish=[s for s, m in mels.items() if t < len(m) <= t + 4], after=ready)
            for uid, pcm in result.wait().items():
                outs[uid].append(pcm)
    for uid, ref in refs.items():
        got = np.concatenate(outs[uid])
        assert got.shape == ref.shape
        assert snr_db(ref, got) > MIN_SNR_DB
        assert result.done()


def test_queued_host_frames_are_copied(tiny_vocoder, rng):
    """A caller may reuse its buffer once `step` returns, even if the frames are still queued."""
    mel = random_mel(rng, 12)
    sv = StreamingVocoder(tiny_vocoder, chunk_frames=8, first_chunk_frames=8)
    sv.open("a")
    buffer = mel[:4].copy()
    out = [sv.push("a", buffer)]
    buffer[:] = 0.0
    out += [sv.push("a", mel[4:].T.T), sv.finish("a")]  # non-contiguous views are fine too
    assert snr_db(offline(tiny_vocoder, mel), np.concatenate(out)) > MIN_SNR_DB


def test_eager_utterances_skip_the_chunk_schedule_after_their_first_chunk(tiny_vocoder, rng):
    mel = random_mel(rng, 40)
    sv = StreamingVocoder(tiny_vocoder, chunk_frames=32, first_chunk_frames=8)
    sv.open("s")
    out = [sv.step({"s": mel[:4]}, eager={"s"})["s"]]  # before the first chunk: eager changes nothing
    assert out[0].size == 0
    out.append(sv.step({"s": mel[4:8]})["s"])  # the first chunk
    assert out[-1].size > 0
    out.append(sv.step({"s": mel[8:10]})["s"])  # schedule: wait for 8 frames
    assert out[-1].size == 0 and sv.pending_frames("s") == 2
    out.append(sv.step({"s": mel[10:12]}, eager={"s"})["s"])  # eager: the 4 pending frames now
    assert out[-1].shape[0] == 4 * tiny_vocoder.config.hop_length and sv.pending_frames("s") == 0
    out.append(sv.step({"s": mel[12:]})["s"])
    out.append(sv.finish("s"))
    assert snr_db(offline(tiny_vocoder, mel), np.concatenate(out)) > 80


@pytest.mark.parametrize("lookahead", [0, 2])
@pytest.mark.parametrize("chunk, first", [(4, 4), (16, 4), (32, 8)])
def test_graph_buckets_equal_offline(lookahead, chunk, first, rng):
    """The CUDA-graph path's padding, run on CPU: every pass padded to its bucket (utterances to a power
    of two on the scratch slot, frames to a multiple of 8) and run on static buffers; passes past the
    largest bucket run eagerly. Ragged utterances, state pool growing mid-run (buckets rebuilt)."""
    model = Vocoder.random(tiny_config(lookahead=lookahead), seed=lookahead)
    mels = {f"s{i}": random_mel(rng, n) for i, n in enumerate([1, 2, 5, 23, 64, 97, 150])}
    with StreamingVocoder(
        model, chunk_frames=chunk, first_chunk_frames=first, initial_capacity=2, static_buckets=True, graph_max_frames=8
    ) as sv:
        got = drive(sv, mels, rng, max_push=12)
        assert sv.graph_passes > 0 and sv.eager_passes > 0  # both paths ran
        assert not sv.cuda_graphs
        buckets = set(sv._graphs.buckets)
    assert all(b & (b - 1) == 0 and n == 8 for b, n in buckets), buckets
    for uid, mel in mels.items():
        ref = offline(model, mel)
        assert got[uid].shape == ref.shape == (len(mel) * 256,), uid
        assert snr_db(ref, got[uid]) > MIN_SNR_DB, uid


def test_graph_options_are_checked(tiny_vocoder):
    with pytest.raises(VocoderConfigError, match="CUDA"):
        StreamingVocoder(tiny_vocoder, cuda_graphs=True, device="cpu")
    with pytest.raises(VocoderConfigError, match="multiple of 8"):
        StreamingVocoder(tiny_vocoder, static_buckets=True, graph_max_frames=12)
    sv = StreamingVocoder(tiny_vocoder)
    assert sv.capture_graphs(64) == 0 and not sv.cuda_graphs


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_graphs_match_cpu_offline(rng, no_tf32):
    model = Vocoder.random(tiny_config(lookahead=2), seed=0)
    mels = {i: random_mel(rng, n) for i, n in enumerate([3, 40, 77, 130])}
    refs = {uid: offline(model, mel) for uid, mel in mels.items()}
    with StreamingVocoder(model, chunk_frames=16, first_chunk_frames=4, device="cuda", cuda_graphs=True) as sv:
        assert sv.capture_graphs(4) == 3 * 8  # 1, 2, 4 utterances x 8..64 frames
        got = drive(sv, mels, rng)
        assert sv.graph_passes > 0 and sv.cuda_graphs
    for uid, ref in refs.items():
        assert got[uid].shape == ref.shape
        assert snr_db(ref, got[uid]) > MIN_SNR_DB
