"""Neural vocoder: natural-log mel `(B, n_mels, T)` -> PCM `(B, T * hop)`.

Modules (imported explicitly, so `vocoder.config` stays importable without loading torch):
  config.VocoderConfig      the one config, `config.json` in a vocoder directory
  mel.MelSpectrogram        the log-mel analysis the acoustic model is trained on
  model.Vocoder             offline generator; `from_dir`, `save`, `random`
  streaming.StreamingVocoder  per-utterance state, chunking, one batched forward across utterances
  errors                    the exceptions raised on purpose
"""
