"""`StreamingVocoder._gather`: device frames assembled into a pass's batch in three launches, as the
in-engine vocoder feeds them (one view per utterance per engine step). Checked on CPU tensors against the
part-by-part assembly it replaces."""

import numpy as np
import torch

from vocoder.batch import gather
from vocoder.streaming import StreamingVocoder


def _parts(rng, lengths, step=4, n_mels=80, pad=0):
    step_mel = torch.from_numpy(rng.standard_normal((len(lengths), 16, n_mels)).astype(np.float32))
    seqs = []
    for row, total in enumerate(lengths):
        seq = [step_mel[row, at : at + step] for at in range(0, total, step)]
        if pad:
            seq.append(np.zeros((pad, n_mels), np.float32))
        seqs.append(seq)
    return seqs


def _reference(seqs, rows, n, n_mels=80):
    batch = np.zeros((rows, n, n_mels), np.float32)
    for b, seq in enumerate(seqs):
        at = 0
        for p in seq:
            batch[b, at : at + p.shape[0]] = p.numpy() if isinstance(p, torch.Tensor) else p
            at += p.shape[0]
    return batch


def test_gather_equals_part_by_part(tiny_vocoder, rng):
    sv = StreamingVocoder(tiny_vocoder, device="cpu")
    n_mels = tiny_vocoder.config.n_mels
    seqs = _parts(rng, [8, 4, 16, 12], n_mels=n_mels) + _parts(rng, [4], n_mels=n_mels, pad=2)
    batch = torch.zeros((6, 18, n_mels))
    assert gather(batch, seqs, sv._to_device)
    np.testing.assert_array_equal(batch.numpy(), _reference(seqs, 6, 18, n_mels))


def test_gather_refuses_host_frames_that_are_not_padding(tiny_vocoder, rng):
    sv = StreamingVocoder(tiny_vocoder, device="cpu")
    n_mels = tiny_vocoder.config.n_mels
    seqs = _parts(rng, [4], n_mels=n_mels)
    seqs[0].append(np.ones((3, n_mels), np.float32))
    batch = torch.zeros((1, 8, n_mels))
    assert not gather(batch, seqs, sv._to_device)
    assert not batch.any()


def test_step_rows_utterance_equals_frames_utterance(tiny_vocoder, rng):
    """Feeding each step's rows by index (`submit(step_rows=)`, the in-engine vocoder's way) gives
    exactly the PCM of feeding the same frames one array per utterance."""
    n_mels = tiny_vocoder.config.n_mels
    by_frames = StreamingVocoder(tiny_vocoder, chunk_frames=8, first_chunk_frames=4, device="cpu")
    by_rows = StreamingVocoder(tiny_vocoder, chunk_frames=8, first_chunk_frames=4, device="cpu")
    ids = ["a", "b", "c"]
    for sv in (by_frames, by_rows):
        for uid in ids:
            sv.open(uid)
    out = {sv: {uid: [] for uid in ids} for sv in (by_frames, by_rows)}
    for step in range(7):
        live = ids if step < 5 else ids[:2]  # "c" ends after 5 steps
        mel = torch.from_numpy(rng.standard_normal((4, 4, n_mels)).astype(np.float32))
        rows = {uid: (2 * i + step) % 4 for i, uid in enumerate(live)}  # rows move between steps
        finish = ["c"] if step == 5 else []
        a = by_frames.submit({uid: mel[r].numpy() for uid, r in rows.items()}, finish=finish).wait()
        b = by_rows.submit({}, finish=finish, step_rows=(mel, rows)).wait()
        for sv, pcm in ((by_frames, a), (by_rows, b)):
            for uid, x in pcm.items():
                out[sv][uid].append(x)
    for uid in ids[:2]:
        out[by_frames][uid].append(by_frames.finish(uid))
        out[by_rows][uid].append(by_rows.finish(uid))
    for uid in ids:
        x, y = np.concatenate(out[by_frames][uid]), np.concatenate(out[by_rows][uid])
        assert x.shape == y.shape and x.size > 0
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)
