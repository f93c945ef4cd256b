"""nginx from Debian in front of loopback replicas, configured by the template shipped in deploy/nginx/
(rendered the way the nginx image's envsubst does, with the upstream line repeated per replica)."""

import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from _server_process import REPO, free_port, timeout

TEMPLATE = REPO / "deploy" / "nginx" / "uttera.conf.template"
_VARIABLE = re.compile(r"\$\{(\w+)\}")

# The test's main config: what the nginx image's /etc/nginx/nginx.conf does, in a private prefix, one
# process running as the current user.
MAIN_CONF = """\
daemon off;
master_process off;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log notice;
events {{ worker_connections 1024; }}
http {{
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    include {prefix}/conf.d/*.conf;
}}
"""


def render(template: str, backends: list[str], port: int, access_log: str) -> str:
    """The template with its ${VARS} substituted; the line naming ${UTTERA_BACKEND} once per backend."""
    lines = []
    for line in template.splitlines(keepends=True):
        if "${UTTERA_BACKEND}" in line and not line.lstrip().startswith("#"):
            lines += [line.replace("${UTTERA_BACKEND}", b) for b in backends]
        else:
            lines.append(line)
    values = {"NGINX_PORT": str(port), "NGINX_ACCESS_LOG": access_log}
    out = "".join(lines)
    code = "\n".join(l for l in out.splitlines() if not l.lstrip().startswith("#"))
    missing = set(_VARIABLE.findall(code)) - values.keys()
    assert not missing, f"the template uses variables the test does not set: {missing}"
    return _VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), out)


@dataclass
class Nginx:
    url: str
    proc: subprocess.Popen
    prefix: Path

    @property
    def access_log(self) -> Path:
        return self.prefix / "access.log"

    def access_lines(self) -> list[dict]:
        """The JSON access log, one object per finished request (nginx writes it when a request ends)."""
        if not self.access_log.exists():
            return []
        return [json.loads(line) for line in self.access_log.read_text().splitlines() if line.strip()]

    def error_log(self) -> str:
        return (self.prefix / "error.log").read_text(errors="replace")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout(10))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def write_config(nginx_bin: str, prefix: Path, backends: list[str], port: int) -> Path:
    """Render the shipped template into `prefix` and check it with `nginx -t`; returns the main config."""
    (prefix / "conf.d").mkdir(parents=True, exist_ok=True)
    site = render(TEMPLATE.read_text(), backends, port, str(prefix / "access.log"))
    (prefix / "conf.d" / "uttera.conf").write_text(site)
    main = prefix / "nginx.conf"
    main.write_text(MAIN_CONF.format(prefix=prefix))
    check = subprocess.run([nginx_bin, "-t", "-p", str(prefix), "-c", str(main)], capture_output=True, text=True)
    assert check.returncode == 0, f"nginx -t failed:\n{check.stderr}\n{site}"
    return main


def start_nginx(nginx_bin: str, prefix: Path, backends: list[str]) -> Nginx:
    port = free_port()
    main = write_config(nginx_bin, prefix, backends, port)
    proc = subprocess.Popen(
        [nginx_bin, "-p", str(prefix), "-c", str(main)],
        stdout=subprocess.DEVNULL,
        stderr=open(prefix / "stderr.log", "wb"),
    )
    server = Nginx(f"http://127.0.0.1:{port}", proc, prefix)
    deadline = time.monotonic() + timeout(20)
    while True:
        try:
            with urllib.request.urlopen(f"{server.url}/nginx-health", timeout=2) as r:
                if r.status == 200:
                    return server
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            server.stop()
            pytest.fail(f"nginx did not start:\n{server.error_log()}")
        time.sleep(0.05)  # poll interval, not a synchronisation
