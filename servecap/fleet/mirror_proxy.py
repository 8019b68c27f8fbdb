"""nginx in front of production's router, mirroring a share of the requests to a shadow pool's router: a
shadow deployment as teams run it, with Debian's nginx's `mirror` and a generated config.

    with MirrorProxy(production_url, shadow_url, fraction=0.5, workdir=out / "proxy") as proxy:
        proxy.url                 # where the replay sends
    proxy.answers                 # the shadow's answers, one file each (never returned to a client)

Every request goes to production, and its answer streams back unbuffered as it comes. nginx's `mirror`
makes a subrequest of each one to an internal location, which passes it on when `split_clients` over
`$request_id` drew it (probability `fraction`, independently: the rule the plan models,
calculators.plan.shadow) and otherwise answers it itself at once (204).

nginx's mirror reads only the head of a subrequest's answer and then closes its connection (the module
sets `header_only`): a streaming shadow would see its client leave after its first bytes and abort the
request (vLLM and the reference server do), so it would never do a copy's decode. So the mirror goes to a
second server of the same nginx (a unix socket in the work dir), which proxies to the shadow's router with
`proxy_store`: nginx reads a stored response to its end whatever its own client does, and writes it to
`answers/` (the shadow's answers are recorded, never returned). A stream's `X-Accel-Buffering: no` (the
reference server and vLLM send it) would turn the buffering, and with it the store, off: it is ignored there. The mirror's subrequest ends at the head
of that answer, so a client's connection is held at most that long; nginx reads the whole request body
before it proxies (the mirror needs it).
"""

from __future__ import annotations

from pathlib import Path

from servecap.fleet.split_proxy import STREAMING, NginxProxy, nginx_config, upstream_lines


def mirror_lines(fraction: float) -> list[str]:
    """The split_clients block's lines for a mirrored `fraction` in (0, 1] (hundredths of a percent)."""
    percent = round(fraction * 100, 2)
    if percent >= 100:
        return ['* "1";']
    if percent <= 0:
        return ['* "0";']
    return [f'{percent:.2f}% "1";', '* "0";']


def mirror_config(port: int, workdir: Path, production_url: str, shadow_url: str, fraction: float) -> str:
    split = "\n".join(f"        {line}" for line in mirror_lines(fraction))
    sink = f"unix:{workdir}/shadow.sock"
    http_body = f"""{upstream_lines({"production": production_url, "shadow": shadow_url})}
    split_clients "${{request_id}}" $servecap_mirror {{
{split}
    }}
    server {{
        listen {sink};
        location / {{
            proxy_pass http://shadow;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering on;
            proxy_ignore_headers X-Accel-Buffering;
            proxy_ignore_client_abort on;
            proxy_store {workdir}/answers/$request_id;
            proxy_read_timeout 600s;
            proxy_send_timeout 600s;
        }}
    }}"""
    server_body = f"""        location / {{
            mirror /servecap_mirror;
            proxy_pass http://production;
{STREAMING}
        }}
        location = /servecap_mirror {{
            internal;
            if ($servecap_mirror = "0") {{ return 204; }}
            proxy_pass http://{sink}:$request_uri;
            proxy_read_timeout 600s;
        }}"""
    return nginx_config(port, workdir, http_body, server_body)


class MirrorProxy(NginxProxy):
    """nginx sending every request to `production_url` and a `fraction` of them to `shadow_url` as well."""

    def __init__(self, production_url: str, shadow_url: str, *, fraction: float, workdir: Path,
                 startup_timeout_s: float = 30.0) -> None:
        super().__init__(lambda port, where: mirror_config(port, where, production_url, shadow_url, fraction),
                         workdir=workdir, needs="a shadow", startup_timeout_s=startup_timeout_s)
        self.answers = self.workdir / "answers"
        self.answers.mkdir(parents=True, exist_ok=True)
