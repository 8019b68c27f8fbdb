"""nginx in front of two versions' routers, splitting requests by weight: a canary rollout as teams run
it, with Debian's nginx and a generated config.

    with SplitProxy(primary_url, canary_url, weight=0.1, workdir=out / "proxy") as proxy:
        proxy.url                 # where the replay sends
        proxy.set_weight(0.25)    # a new config, then `nginx -s reload` (SIGHUP): graceful, streams go on

The split is nginx's `split_clients` over `$request_id` (nginx's own random 32-hex id per request), so
each request goes to the canary with probability `weight`, independently: the rule the plan models
(calculators.plan.canary). nginx reads the percentage with two decimals; a weight of 0 or 1 sends every
request to one version (split_clients refuses a 0% line). Responses stream through unbuffered, and
every answer names its version before the replica that gave it in `X-Servecap-Replica` (`canary/c0`;
`primary/` when the router answered an error itself), so each record says which version it went to.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from servecap.launch.command import CommandSpec
from servecap.launch.process import ServerProcess

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
CONFIG = "nginx.conf"


def split_lines(weight: float) -> list[str]:
    """The split_clients block's lines for a canary `weight` in [0, 1] (hundredths of a percent)."""
    percent = round(weight * 100, 2)
    if percent <= 0:
        return ["* primary;"]
    if percent >= 100:
        return ["* canary;"]
    return [f"{percent:.2f}% canary;", "* primary;"]


def upstream_lines(upstreams: dict[str, str]) -> str:
    """An nginx upstream block per name -> URL, each keeping idle connections to its server."""
    return "\n".join(f"    upstream {name} {{ server {url.split('://', 1)[1].rstrip('/')}; keepalive 64; }}"
                     for name, url in upstreams.items())


def nginx_config(port: int, workdir: Path, http_body: str, server_body: str) -> str:
    """A whole config around `http_body` (upstreams, maps) and `server_body` (locations) on 127.0.0.1:port:
    in the foreground, its pid, logs and temp files in `workdir`, and GET /ready for the launcher."""
    user = "user root;\n" if os.geteuid() == 0 else ""   # as root, the workers keep the work dir's access
    return f"""{user}worker_processes 1;
daemon off;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log {workdir}/access.log;
    client_body_temp_path {workdir}/tmp;
    proxy_temp_path {workdir}/tmp;
{http_body}
    server {{
        listen 127.0.0.1:{port};
        location = /ready {{ return 200 "ready\\n"; }}
{server_body}
    }}
}}
"""


STREAMING = """            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 600s;
            proxy_send_timeout 600s;"""   # a location's lines that pass a stream through as it comes


def config_text(port: int, primary_url: str, canary_url: str, weight: float, workdir: Path) -> str:
    split = "\n".join(f"        {line}" for line in split_lines(weight))
    http_body = f"""{upstream_lines({"primary": primary_url, "canary": canary_url})}
    split_clients "${{request_id}}" $servecap_version {{
{split}
    }}"""
    server_body = f"""        location / {{
            proxy_pass http://$servecap_version;
{STREAMING}
            proxy_request_buffering off;
            proxy_hide_header X-Servecap-Replica;
            add_header X-Servecap-Replica "$servecap_version/$upstream_http_x_servecap_replica" always;
        }}"""
    return nginx_config(port, workdir, http_body, server_body)


@dataclass(frozen=True)
class ProxySpec(CommandSpec):
    """nginx with a config written for the port it is started on (`config(port)`)."""

    config: Callable[[int], str] | None = None
    workdir: Path = Path(".")

    def command(self, port: int) -> list[str]:
        (self.workdir / "tmp").mkdir(parents=True, exist_ok=True)
        (self.workdir / CONFIG).write_text(self.config(port))
        return [NGINX, "-p", str(self.workdir), "-c", str(self.workdir / CONFIG)]


class NginxProxy:
    """A running nginx on a generated config (`config(port, workdir)`); a context manager (stops it on exit)."""

    def __init__(self, config: Callable[[int, Path], str], *, workdir: Path, needs: str,
                 startup_timeout_s: float = 30.0) -> None:
        if not Path(NGINX).exists():
            raise ValueError(f"nginx is not installed: {needs} runs behind Debian's nginx (apt-get install nginx)")
        workdir = Path(workdir).resolve()
        self.workdir = workdir
        self.spec = ProxySpec(("nginx", "{port}"), ready_path="/ready", config=lambda port: config(port, workdir),
                              workdir=workdir)
        self.port: int | None = None
        self.process = ServerProcess(self.spec, log_path=workdir / "nginx.log", startup_timeout_s=startup_timeout_s)

    @property
    def url(self) -> str:
        return self.process.base_url

    def __enter__(self):
        self.process.__enter__()
        self.port = int(self.url.rsplit(":", 1)[1])
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.__exit__(*exc)

    def reconfigure(self, config: Callable[[int, Path], str]) -> None:
        """A new config, then a reload (SIGHUP): nginx's new workers take new requests, the old finish theirs."""
        (self.workdir / CONFIG).write_text(config(self.port, self.workdir))
        os.kill(self.process.pid, signal.SIGHUP)


class SplitProxy(NginxProxy):
    """nginx splitting between two upstream URLs by weight."""

    def __init__(self, primary_url: str, canary_url: str, *, weight: float, workdir: Path,
                 startup_timeout_s: float = 30.0) -> None:
        self.primary_url, self.canary_url = primary_url, canary_url
        super().__init__(lambda port, where: config_text(port, primary_url, canary_url, weight, where),
                         workdir=workdir, needs="a canary", startup_timeout_s=startup_timeout_s)

    def set_weight(self, weight: float) -> None:
        """Rewrite the split and reload: nginx's new workers take new requests, the old ones finish theirs."""
        self.reconfigure(lambda port, where: config_text(port, self.primary_url, self.canary_url, weight, where))
