"""`vllm.general_plugins` entry point: runs in every vLLM process (frontend, engine core, workers).

The serving process also calls `register` itself before it builds engine arguments: vLLM's own
`load_general_plugins` marks the plugins loaded before it runs them, so a second thread building
arguments at the same time (two engines started side by side) would see the flag, skip, and find the
architecture unregistered. The lock makes the patches and the registration happen once per process.
"""

import threading

_lock = threading.Lock()


def register() -> None:
    with _lock:
        from vllm import ModelRegistry

        import engine_patches

        engine_patches.apply()
        if "UtteraTTSForCausalLM" not in ModelRegistry.get_supported_archs():
            ModelRegistry.register_model("UtteraTTSForCausalLM", "uttera_server.model.tts_model:UtteraTTSForCausalLM")
