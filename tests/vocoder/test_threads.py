"""The server runs the vocoder on its own thread (uttera_server/synthesis/vocoder_worker.py); check the
assumptions that design relies on, with the real vocoder."""

import threading

import numpy as np
import torch
from tests.vocoder.voc_helpers import offline, random_mel, snr_db


def test_torch_thread_count_is_per_thread():
    if "OpenMP" not in torch.__config__.parallel_info():
        return  # only the OpenMP backend keeps the count per thread
    before = torch.get_num_threads()
    seen = []

    def worker():
        torch.set_num_threads(1)
        seen.append(torch.get_num_threads())

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [1] and torch.get_num_threads() == before


def test_steps_from_another_thread_match_offline(tiny_vocoder, rng):
    from vocoder.streaming import StreamingVocoder

    mel = random_mel(rng, 50)
    sv = StreamingVocoder(tiny_vocoder, chunk_frames=8)
    sv.open("a")
    out = []

    def worker():
        torch.set_num_threads(1)
        for t in range(0, 50, 4):
            out.append(sv.push("a", mel[t : t + 4]))
        out.append(sv.finish("a"))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    got = np.concatenate(out)
    assert snr_db(offline(tiny_vocoder, mel), got) > 80
