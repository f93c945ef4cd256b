"""Where the streaming vocoder runs (`EngineConfig.vocoder_process`, `vocoder_device`): policy, resolved once."""

from ..errors import ConfigError


def vocoder_process(setting: str, device: str) -> str:
    """`EngineConfig.vocoder_process` resolved: "auto" is the engine's worker when the vocoder runs on
    CUDA (one CUDA context; no mel round trip through the host), this process on CPU (where the
    worker's cores are the engine's, and the vocoder runs beside it on the other core)."""
    if setting == "auto":
        return "engine" if device == "cuda" else "frontend"
    return setting


def vocoder_device(setting: str) -> str:
    """`EngineConfig.vocoder_device` resolved in this process: "auto" is CUDA when torch sees a GPU."""
    import torch

    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if setting == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--vocoder-device cuda: this process sees no CUDA device (use auto or cpu)")
    return setting
