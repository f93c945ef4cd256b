"""What every endpoint of one app shares; built once by `app.build_app`."""

from dataclasses import dataclass

from .config import ServerConfig
from .metrics import ServerMetrics
from .speech_params import Catalog
from .streams import ActiveStreams
from .synthesis import SpeechSynthesizer


@dataclass(slots=True)
class AppState:
    config: ServerConfig
    synth: SpeechSynthesizer
    metrics: ServerMetrics
    streams: ActiveStreams
    catalog: Catalog
    created: int  # unix time the app was built, for /v1/models
    start_error: str | None = None  # why the engine failed to start, if it did
