"""Code that runs inside vLLM's processes (engine core and workers), loaded there by the
`vllm.general_plugins` entry point (`plugin.register`), never imported by the serving code at run time:

- `tts_model`: the acoustic model as a vLLM architecture (`UtteraTTSForCausalLM`);
- `step_mel`: the per-step hand-off of its mel chunks to the runner patch (engine_patches/gpu_model_runner.py),
  the one contract between the model and the patched runner, written as a class that checks it;
- `pointer_logits`: the logits processor that enforces the pointer rules per request;
- `pointer_rules`: the pointer rules as a pure function (also used by training and the benchmarks).

The serving side talks to this code only through vLLM (`uttera_server.synthesis.mel_engine.MelEngine`).
"""
