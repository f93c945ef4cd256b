"""`/openapi.json`: built from the routes and speech_params, so every route and format is in it."""

from starlette.routing import Route, WebSocketRoute

from uttera_server.http.openapi import build
from uttera_server.speech_params import AudioFormat, StreamFormat
from uttera_server.synthesis.speed import MAX_SPEED, MIN_SPEED


async def _endpoint(request):
    """First paragraph is the summary.

    Not this one."""


def test_every_route_is_described():
    routes = [
        Route("/a", _endpoint),
        Route("/v1/audio/speech", _endpoint, methods=["GET", "POST"]),
        WebSocketRoute("/ws", _endpoint),
    ]
    doc = build(routes, 22050, 100, ["default"], "1")
    assert set(doc["paths"]) == {"/a", "/v1/audio/speech", "/ws"}
    assert doc["paths"]["/a"]["get"]["summary"] == "First paragraph is the summary."
    assert set(doc["paths"]["/v1/audio/speech"]) == {"get", "post"}


async def test_served_document(http):
    r = await http.get("/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.")
    assert {
        "/",
        "/openapi.json",
        "/v1/audio/speech",
        "/v1/audio/speech/stream",
        "/v1/models",
        "/v1/audio/voices",
        "/health",
        "/metrics",
    } <= set(doc["paths"])
    body = doc["paths"]["/v1/audio/speech"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    props = body["properties"]
    assert props["response_format"]["enum"] == [f.value for f in AudioFormat]
    assert props["stream_format"]["enum"] == [f.value for f in StreamFormat]
    assert (props["speed"]["minimum"], props["speed"]["maximum"]) == (MIN_SPEED, MAX_SPEED)
    assert set(body["required"]) == {"model", "input"}
    query = {p["name"] for p in doc["paths"]["/v1/audio/speech"]["get"]["parameters"]}
    assert query == set(props)
    media = doc["paths"]["/v1/audio/speech"]["post"]["responses"]["200"]["content"]
    assert {"audio/mpeg", "audio/ogg", "audio/flac", "audio/aac", "audio/basic", "text/event-stream"} <= set(media)


async def test_playground_is_served(http):
    r = await http.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert 'id="speak"' in r.text and 'id="ttfa"' in r.text
    js = await http.get("/playground/playground.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
