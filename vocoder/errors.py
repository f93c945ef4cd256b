"""Errors raised by the vocoder package.

Everything a caller can trigger derives from `VocoderError`, so the server can catch one type. The
classes also derive from the builtin they refine (`ValueError`, `KeyError`, `RuntimeError`) so that
generic handlers keep working.

    VocoderError
    ├── VocoderConfigError (ValueError)   bad or inconsistent config.json / constructor arguments
    ├── VocoderCheckpointError (ValueError) model directory missing files or holding wrong tensors
    ├── FrameShapeError (ValueError)      mel frames of the wrong shape, dtype or device
    ├── UnknownUtteranceError (KeyError)     an utterance id that was never opened, or already closed
    └── UtteranceStateError (RuntimeError)   an illegal utterance transition (open twice, push after finish)
"""

from __future__ import annotations


class VocoderError(Exception):
    """Base class of every error this package raises on purpose."""


class VocoderConfigError(VocoderError, ValueError):
    """A `VocoderConfig` field is out of range or inconsistent with another field."""


class VocoderCheckpointError(VocoderError, ValueError):
    """A vocoder directory cannot be loaded: missing file, unknown key, or tensor shape mismatch."""


class FrameShapeError(VocoderError, ValueError):
    """Mel frames passed to the streaming vocoder are not `(k, n_mels)` floating point."""


class UnknownUtteranceError(VocoderError, KeyError):
    """The utterance id was never opened on this `StreamingVocoder`, or was already finished/cancelled."""

    def __str__(self) -> str:  # KeyError would repr() the message; keep it readable.
        return str(self.args[0]) if self.args else ""


class UtteranceStateError(VocoderError, RuntimeError):
    """An operation is illegal in the utterance's current state (e.g. opening an id that is open)."""
