"""Errors of the text frontend.

User-triggerable problems are ``ValueError`` subclasses whose message says what to change; the
lead may re-parent them under ``uttera_server.errors``.
"""


class FrontendError(ValueError):
    """Base class of input errors raised by the text frontend."""


class NothingToSpeakError(FrontendError):
    """The text holds no letters, digits or speakable symbols (empty, whitespace, punctuation)."""


class SegmenterClosedError(RuntimeError):
    """A Segmenter was used after ``flush()`` (a programming error, not a user error)."""
