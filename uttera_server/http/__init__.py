"""HTTP: `POST /v1/audio/speech` (`speech`, with SSE in `sse`), the info endpoints (`info`), the OpenAPI
document and playground (`openapi`, `web`), and uvicorn's request-head limits (`limits`)."""
