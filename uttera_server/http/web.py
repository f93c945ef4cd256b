"""The routes for people and tools rather than for speech clients: the playground at `/` (static files in
`playground/`, no build step) and `/openapi.json` (openapi.py)."""

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from .openapi import openapi_json

PLAYGROUND = Path(__file__).parent.parent / "playground"


async def playground(request: Request) -> FileResponse:
    """The browser playground: type text, hear it stream, see time to first audio and word timings."""
    return FileResponse(PLAYGROUND / "index.html", headers={"cache-control": "no-cache"})


def routes() -> list[BaseRoute]:
    return [
        Route("/", playground),
        Mount("/playground", StaticFiles(directory=PLAYGROUND), name="playground"),
        Route("/openapi.json", openapi_json),
    ]
