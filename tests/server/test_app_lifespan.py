"""app.py's lifespan: once the engine is up, the serving process caches vLLM's environment (the real app
in-process, Starlette's TestClient, with a stand-in synthesizer; conftest.py's `live_vllm_environment`
turns the cache off again after each test)."""

import time

from _stand_ins import IdleSynthesizer
from starlette.testclient import TestClient

from uttera_server.app import build_app
from uttera_server.config import ServerConfig


def test_the_serving_process_caches_vllms_environment_once_the_engine_is_up(tmp_path):
    from vllm import envs

    envs.disable_envs_cache()
    with TestClient(build_app(ServerConfig(model_dir=tmp_path, freeze_heap=False), IdleSynthesizer())) as client:
        assert client.get("/health").status_code == 200
        deadline = time.monotonic() + 10  # the engine starts in a task of the lifespan's
        while not envs._is_envs_cache_enabled() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert envs._is_envs_cache_enabled()  # vLLM's own check (its engine core and workers do the same)


def test_an_engine_that_fails_to_start_leaves_the_environment_live(tmp_path):
    from vllm import envs

    class Failing(IdleSynthesizer):
        async def start(self) -> None:
            raise RuntimeError("no engine")

    envs.disable_envs_cache()
    with TestClient(build_app(ServerConfig(model_dir=tmp_path, freeze_heap=False), Failing())) as client:
        deadline = time.monotonic() + 10
        while client.get("/health").json()["status"] != "failed" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert client.get("/health").json() == {"status": "failed", "error": "RuntimeError: no engine"}
        assert not envs._is_envs_cache_enabled()
