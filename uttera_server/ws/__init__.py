"""The speech WebSocket (`/v1/audio/speech/stream`).

Sans-I/O core: `messages` (wire format), `protocol` (the session state machine), `context` (one context's
text and audio), `actions` (what the core asks the driver to do), `text_chunker`, `playout`. I/O:
`endpoint` (the Starlette handler that drives the core) and `outbox` (the bounded send queue).
"""
