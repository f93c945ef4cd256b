"""Encoding the synthesizer's PCM for clients: WAV (`wav`) and the streamed codecs (`formats`)."""
