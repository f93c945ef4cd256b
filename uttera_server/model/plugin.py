"""`vllm.general_plugins` entry point: runs in every vLLM process (frontend, engine core, workers)."""


def register() -> None:
    from vllm import ModelRegistry

    import engine_patches

    engine_patches.apply()
    if "UtteraTTSForCausalLM" not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model("UtteraTTSForCausalLM", "uttera_server.model.tts_model:UtteraTTSForCausalLM")
