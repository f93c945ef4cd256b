"""The flags of the `exposed` test server (tests/server/conftest.py): API keys, a CORS allowlist, short
header/body/keep-alive deadlines, header limits and admission bounds."""

from pathlib import Path

from _server_process import ServerProcess, start_server

KEYS = ("key-one", "key-two")
GOOD_ORIGIN = "https://good.example"
HEADER_TIMEOUT_S = 3.0  # long enough that a client on a loaded 2-core host sends its request in time
BODY_TIMEOUT_S = 1.0
KEEP_ALIVE_S = 3  # (a pooled connection closed by the server as the client reuses it is a client-side race)
MAX_HEADER_BYTES = 8192
MAX_HEADER_COUNT = 40
MAX_WAITING = 1
MAX_CONNECTIONS = 16  # above the stalled-body connections test_security.py holds at once (10) + 1


def start_exposed(model_dir: Path, log_path: Path) -> ServerProcess:
    args = [a for k in KEYS for a in ("--api-key", k)]
    args += [
        "--cors-origins",
        GOOD_ORIGIN,
        "--header-timeout-s",
        str(HEADER_TIMEOUT_S),
        "--body-timeout-s",
        str(BODY_TIMEOUT_S),
        "--keep-alive-timeout-s",
        str(KEEP_ALIVE_S),
        "--max-header-bytes",
        str(MAX_HEADER_BYTES),
        "--max-header-count",
        str(MAX_HEADER_COUNT),
        "--max-waiting",
        str(MAX_WAITING),
        "--max-connections",
        str(MAX_CONNECTIONS),
    ]
    return start_server(model_dir, log_path, tuple(args))
