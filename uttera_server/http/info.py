"""Small read-only endpoints: health, models, voices, metrics."""

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..app_state import AppState
from ..speech_params import MODEL_ALIAS

RANDOM_WEIGHTS_NOTE = "random weights (development model)"


async def health(request: Request) -> JSONResponse:
    """200 once the engine is ready; 503 while it starts, after it failed, and during shutdown."""
    state: AppState = request.app.state.uttera
    synth = state.synth
    if state.start_error is not None or synth.is_failed():
        error = state.start_error or "the engine or its vocoder failed (the server log has the details): restart"
        return JSONResponse({"status": "failed", "error": error}, 503)
    if not state.streams.accepting:
        return JSONResponse({"status": "shutting_down"}, 503)
    if not synth.is_ready():
        return JSONResponse({"status": "starting"}, 503)
    # Which serving process answered (`--api-servers`): 0 with one.
    return JSONResponse({"status": "ok", "serving_process": synth.sink})


async def list_models(request: Request) -> JSONResponse:
    """OpenAI list format; `uttera` always names the served model."""
    state: AppState = request.app.state.uttera
    ids = dict.fromkeys((MODEL_ALIAS, state.synth.model_id))
    data = [{"id": i, "object": "model", "created": state.created, "owned_by": "uttera"} for i in ids]
    return JSONResponse({"object": "list", "data": data})


async def list_voices(request: Request) -> JSONResponse:
    """Every voice of the model; `default: true` marks the one `"default"` names (the first)."""
    state: AppState = request.app.state.uttera
    data = []
    for index, voice in enumerate(state.synth.voices.values()):
        description = voice.description
        if voice.random_weights and RANDOM_WEIGHTS_NOTE not in description:
            description = f"{description}; {RANDOM_WEIGHTS_NOTE}" if description else RANDOM_WEIGHTS_NOTE
        data.append({
            "id": voice.id,
            "name": voice.name,
            "language": voice.language,
            "description": description,
            "random_weights": voice.random_weights,
            "sample_rate": voice.sample_rate,
            "gender": voice.gender,
            "teacher": voice.teacher,
            "license": voice.license,
            "vocoder": state.synth.vocoder,
            "default": index == 0,
        })  # fmt: skip
    return JSONResponse({"object": "list", "data": data})


async def metrics(request: Request) -> Response:
    state: AppState = request.app.state.uttera
    body, content_type = state.metrics.render()
    return Response(body, headers={"content-type": content_type})
