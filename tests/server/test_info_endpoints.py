"""GET /health, /v1/models, /v1/audio/voices, /metrics against the real server."""

from websockets.asyncio.client import connect

from _speech_client import collect_until, metric, read_metrics, requests_total, send_json

METRIC_NAMES = (
    "uttera_time_to_first_audio_seconds_count",
    "uttera_realtime_factor_count",
    "uttera_active_streams",
    "uttera_requests_total",
    "uttera_audio_seconds_total",
    "uttera_engine_waiting_requests",
    "uttera_engine_running_requests",
)


async def test_health(http):
    r = await http.get("/health")
    assert r.status_code == 200 and r.json() == {"status": "ok", "serving_process": 0}


async def test_models_list_names_uttera(http):
    body = (await http.get("/v1/models")).json()
    assert body["object"] == "list"
    ids = [m["id"] for m in body["data"]]
    assert "uttera" in ids
    assert all(m["object"] == "model" and m["owned_by"] and isinstance(m["created"], int) for m in body["data"])


async def test_voices_include_default_and_flag_random_weights(http):
    voices = {v["id"]: v for v in (await http.get("/v1/audio/voices")).json()["data"]}
    default = voices["default"]
    fields = {"name", "language", "description", "random_weights", "sample_rate", "gender", "teacher", "license"}
    assert fields <= set(default)
    assert default["vocoder"] == "voice"  # the model directory's own, the default `--vocoder`
    assert isinstance(default["random_weights"], bool)
    assert default["sample_rate"] == 22050  # the tiny model's, as `x-sample-rate` declares it
    assert list(voices) == ["default"] and default["default"] is True  # a single-voice model: today's shape
    assert default["gender"] is None and default["teacher"] is None  # the tiny test model names none
    if default["random_weights"]:  # the tiny test model has random weights
        assert "random weights (development model)" in default["description"]


async def test_unknown_route_is_a_json_404(http):
    r = await http.get("/v1/nothing")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


async def test_metrics_count_traffic(http, ws_url):
    before = await read_metrics(http)
    r = await http.post("/v1/audio/speech", json={"model": "uttera", "input": "Counting.", "response_format": "pcm"})
    assert r.status_code == 200
    async with connect(ws_url) as ws:
        await send_json(ws, type="text", text="Counting too.")
        await send_json(ws, type="end")
        await collect_until(ws, "done")
    after = await read_metrics(http)
    names = {name for name, _ in after}
    assert set(METRIC_NAMES) <= names
    assert requests_total(after, "http", "ok") >= requests_total(before, "http", "ok") + 1
    assert requests_total(after, "websocket", "ok") >= requests_total(before, "websocket", "ok") + 1
    for transport in ("http", "websocket"):
        count = "uttera_time_to_first_audio_seconds_count"
        assert metric(after, count, transport=transport) >= metric(before, count, transport=transport) + 1
    assert metric(after, "uttera_realtime_factor_count") >= metric(before, "uttera_realtime_factor_count") + 2
    assert metric(after, "uttera_audio_seconds_total") > metric(before, "uttera_audio_seconds_total")
    assert metric(after, "uttera_active_streams") == 0
    # latency buckets run from 5 ms to 10 s
    buckets = {dict(labels)["le"] for name, labels in after if name == "uttera_time_to_first_audio_seconds_bucket"}
    assert {"0.005", "10.0", "+Inf"} <= buckets
