"""Several engine cores on one GPU: `--data-parallel-size N` on a host with fewer than N GPU groups.

vLLM 0.32 runs each data-parallel rank of a dense model as an independent engine core and puts rank r's
worker on GPU `r * tp` (gpu_worker.Worker.init_device), so two ranks on a one-GPU host fail an
assertion. A TTS engine of our size is bound by host work per row and step (one Python thread per
engine core, benchmarks/RESULTS.md "H200"), not by the GPU, so more engine cores than GPUs is a
setting worth having: rank r goes to GPU group `r % groups` instead. Each engine then needs its own
`--kv-cache-memory-bytes` (fractional memory settings profile a GPU the others are filling).

The patch runs in the engine-core process (plugins load there before its worker is made).
"""

import logging

log = logging.getLogger(__name__)

_MARK = "_uttera_shared_gpu"


def rank_on_host(local_dp_rank: int, ranks_per_host: int) -> int:
    """The local DP rank whose GPUs rank `local_dp_rank` uses when the host fits `ranks_per_host`."""
    if ranks_per_host < 1:
        raise ValueError(f"this host has no room for one engine's GPU group (ranks_per_host={ranks_per_host})")
    return local_dp_rank % ranks_per_host


def patch() -> None:
    try:
        from vllm.v1.worker.gpu_worker import Worker
    except ImportError:  # a build without the CUDA worker
        return
    if getattr(Worker, _MARK, False):
        return
    original = Worker.init_device

    def init_device(self: Worker) -> None:
        pc = self.parallel_config
        rank = pc.data_parallel_rank_local
        if self.device_config.device_type == "cuda" and rank:
            import torch

            group = pc.tensor_parallel_size * pc.pipeline_parallel_size
            fits = torch.cuda.device_count() // group
            if rank >= fits:
                shared = rank_on_host(rank, fits)
                log.info(
                    "engine core of data-parallel rank %d shares the GPU(s) of rank %d (%d GPU group(s) on this host)",
                    rank,
                    shared,
                    fits,
                )
                pc.data_parallel_rank_local = shared
        original(self)

    Worker.init_device = init_device  # type: ignore[method-assign]  # the patch itself
    setattr(Worker, _MARK, True)
