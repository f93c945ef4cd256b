"""Configuration: validation in the dataclasses, built once from CLI flags."""

import dataclasses

import pytest

from uttera_server.cli import main
from uttera_server.flags import build_config, build_parser
from uttera_server.config import EngineConfig, ServerConfig
from uttera_server.errors import ConfigError


def test_defaults_are_valid(tmp_path):
    config = ServerConfig(model_dir=tmp_path)
    assert config.max_input_chars == 4096 and config.engine == EngineConfig()
    assert config.engine.gpu_memory_utilization == 0.3


@pytest.mark.parametrize("field, value, flag", [
    ("max_num_seqs", 0, "--max-num-seqs"),
    ("max_model_len", -1, "--max-model-len"),
    ("gpu_memory_utilization", 0.0, "--gpu-memory-utilization"),
    ("gpu_memory_utilization", 1.5, "--gpu-memory-utilization"),
    ("kv_cache_memory_bytes", 0, "--kv-cache-memory-bytes"),
    ("dtype", "float8", "--dtype"),
    ("tensor_parallel_size", 0, "--tensor-parallel-size"),
    ("data_parallel_size", 0, "--data-parallel-size"),
    ("distributed_executor_backend", "ray", "--distributed-executor-backend"),
    ("block_size", 24, "--block-size"),
    ("vocoder_chunk_frames", 0, "--vocoder-chunk-frames"),
    ("first_chunk_frames", -4, "--first-chunk-frames"),
    ("seed", -1, "--seed"),
    ("scheduling", "lifo", "--scheduling"),
    ("vocoder_device", "tpu", "--vocoder-device"),
    ("prefill_chunk_tokens", -1, "--prefill-chunk-tokens"),
    ("switch_interval_ms", 0.0, "--switch-interval-ms"),
    ("vocoder_driver", "process", "--vocoder-driver"),
    ("stream_interval", 0, "--stream-interval"),
    ("max_lead_s", 0.0, "--max-lead-s"),
])  # fmt: skip
def test_engine_config_names_the_flag(field, value, flag):
    with pytest.raises(ConfigError, match=flag):
        EngineConfig(**{field: value})


def test_in_process_model_runs_one_gpu_per_engine_core():
    # unset: each engine core of one GPU runs its model in its own process, also under data parallelism
    assert EngineConfig(data_parallel_size=4).executor_backend() == "uni"
    assert EngineConfig(tensor_parallel_size=2).executor_backend() == "mp"
    assert EngineConfig(data_parallel_size=4, distributed_executor_backend="mp").executor_backend() == "mp"
    assert EngineConfig(data_parallel_size=4, distributed_executor_backend="uni").data_parallel_size == 4
    with pytest.raises(ConfigError, match="--tensor-parallel-size"):
        EngineConfig(tensor_parallel_size=2, distributed_executor_backend="uni")


@pytest.mark.parametrize("field, value, flag", [
    ("port", 70000, "--port"),
    ("max_input_chars", 0, "--max-input-chars"),
    ("log_level", "loud", "--log-level"),
    ("graceful_shutdown_s", -1.0, "--graceful-shutdown-timeout"),
    ("ws_max_contexts", 0, "--ws-max-contexts"),
    ("ws_max_buffered_chars", 0, "--ws-max-buffered-chars"),
    ("ws_idle_timeout_s", 0.0, "--ws-idle-timeout-s"),
    ("ws_max_wait_ms", -5.0, "--ws-max-wait-ms"),
    ("ws_min_chunk_chars", 0, "--ws-min-chunk-chars"),
    ("event_loop", "trio", "--event-loop"),
])  # fmt: skip
def test_server_config_names_the_flag(tmp_path, field, value, flag):
    with pytest.raises(ConfigError, match=flag):
        ServerConfig(model_dir=tmp_path, **{field: value})


def test_missing_model_dir_says_how_to_make_one(tmp_path):
    with pytest.raises(ConfigError, match="uttera_server.tiny_model"):
        ServerConfig(model_dir=tmp_path / "nope")


def test_outbox_watermarks_are_ordered(tmp_path):
    with pytest.raises(ConfigError):
        ServerConfig(model_dir=tmp_path, ws_outbox_high_bytes=10, ws_outbox_low_bytes=20)


def test_configs_are_frozen(tmp_path):
    with pytest.raises(dataclasses.FrozenInstanceError):
        ServerConfig(model_dir=tmp_path).port = 1


def test_flags_build_both_configs(tmp_path):
    args = build_parser().parse_args([
        "serve", "--model", str(tmp_path), "--host", "0.0.0.0", "--port", "9000", "--max-input-chars", "100",
        "--max-num-seqs", "4", "--max-model-len", "2048", "--gpu-memory-utilization", "0.5",
        "--kv-cache-memory-bytes", "1000000", "--dtype", "float32", "--tensor-parallel-size", "2",
        "--block-size", "32", "--enable-prefix-caching", "--enforce-eager", "--seed", "3",
        "--vocoder-chunk-frames", "16", "--first-chunk-frames", "4", "--graceful-shutdown-timeout", "5",
        "--scheduling", "fcfs", "--vocoder-device", "cpu", "--prefill-chunk-tokens", "48",
        "--switch-interval-ms", "0.5", "--vocoder-driver", "loop", "--vocoder-cuda-graphs",
        "--stream-interval", "2", "--max-lead-s", "1.5", "--data-parallel-size", "2",
        "--vocoder-process", "engine", "--api-servers", "3", "--async-scheduling",
        "--distributed-executor-backend", "mp",
    ])  # fmt: skip
    assert build_config(args) == ServerConfig(
        model_dir=tmp_path, host="0.0.0.0", port=9000, max_input_chars=100, graceful_shutdown_s=5.0,
        api_servers=3,
        engine=EngineConfig(max_num_seqs=4, max_model_len=2048, gpu_memory_utilization=0.5, data_parallel_size=2,
                            vocoder_process="engine",
                            kv_cache_memory_bytes=1000000, dtype="float32", tensor_parallel_size=2,
                            block_size=32, enable_prefix_caching=True, enforce_eager=True, seed=3,
                            vocoder_chunk_frames=16, first_chunk_frames=4, scheduling="fcfs",
                            vocoder_device="cpu", prefill_chunk_tokens=48, switch_interval_ms=0.5,
                            vocoder_driver="loop", vocoder_cuda_graphs=True,
                            stream_interval=2, max_lead_s=1.5, async_scheduling=True,
                            distributed_executor_backend="mp"),
    )  # fmt: skip


def test_websocket_flags(tmp_path):
    args = build_parser().parse_args([
        "serve", "--model", str(tmp_path), "--ws-max-contexts", "16", "--ws-max-buffered-chars", "2000",
        "--ws-idle-timeout-s", "20", "--ws-max-wait-ms", "150", "--ws-min-chunk-chars", "12",
    ])  # fmt: skip
    config = build_config(args)
    assert config == ServerConfig(
        model_dir=tmp_path,
        ws_max_contexts=16,
        ws_max_buffered_chars=2000,
        ws_idle_timeout_s=20.0,
        ws_max_wait_ms=150.0,
        ws_min_chunk_chars=12,
    )
    assert config.ws_buffer_chars == 2000
    assert ServerConfig(model_dir=tmp_path, max_input_chars=100).ws_buffer_chars == 100  # unset: max_input_chars


def test_unset_flags_keep_the_dataclass_defaults(tmp_path):
    config = build_config(build_parser().parse_args(["serve", "--model", str(tmp_path)]))
    assert config == ServerConfig(model_dir=tmp_path)
    negated = build_parser().parse_args(["serve", "--model", str(tmp_path), "--no-enable-prefix-caching"])
    assert build_config(negated).engine.enable_prefix_caching is False


def test_say_takes_the_same_engine_flags(tmp_path):
    args = build_parser().parse_args(
        [
            "say",
            "Hello.",
            "-o",
            str(tmp_path / "x.wav"),
            "--model",
            str(tmp_path),
            "--first-chunk-frames",
            "2",
            "--speed",
            "1.5",
        ]
    )
    assert build_config(args).engine.first_chunk_frames == 2 and args.speed == 1.5


def test_invalid_values_exit_2_with_the_message(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(
            ["serve", "--model", str(tmp_path), "--gpu-memory-utilization", "2"],
            synthesizer_factory=lambda c: pytest.fail("no synthesizer for an invalid config"),
        )
    assert info.value.code == 2 and "--gpu-memory-utilization" in capsys.readouterr().err


def test_vocoder_on_cuda_without_a_gpu_fails_before_serving(tiny_model_dir, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--model", str(tiny_model_dir), "--vocoder-device", "cuda"])
    assert exit_info.value.code == 2
    assert "--vocoder-device cuda: this process sees no CUDA device" in capsys.readouterr().err


def test_event_loop_flag(tmp_path):
    assert build_config(build_parser().parse_args(["serve", "--model", str(tmp_path)])).event_loop == "uvloop"
    args = build_parser().parse_args(["serve", "--model", str(tmp_path), "--event-loop", "asyncio"])
    assert build_config(args) == ServerConfig(model_dir=tmp_path, event_loop="asyncio")


def test_paced_websocket_contexts_run_one_segment_at_a_time(tmp_path):
    """With --max-lead-s a context's next segment starts once the one before has all its audio (pacing
    keeps that audio ahead of playback); unpaced, two segments run at once (ws/endpoint.session_limits)."""
    from types import SimpleNamespace

    from uttera_server.ws.endpoint import session_limits

    def depth(args: list[str]) -> int:
        config = build_config(build_parser().parse_args(["serve", "--model", str(tmp_path), *args]))
        state = SimpleNamespace(
            config=config,
            catalog=SimpleNamespace(max_input_chars=config.max_input_chars, voices={}),
            synth=SimpleNamespace(sample_rate=22050),
        )
        return session_limits(state, 60.0).pipeline_depth  # type: ignore[arg-type]  # the fields it reads

    assert depth([]) == 2
    assert depth(["--max-lead-s", "2"]) == 1
