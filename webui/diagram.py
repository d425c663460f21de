"""The architecture picture of a deployment, drawn from its spec as inline SVG (a pure function).

System node(s) with the KubeRay operator and the CPU-only Ray head (Serve ingress, the OpenAI
endpoint), the GPU node groups (prefill and decode, or the colocated engines) inside the one
availability zone EFA needs, and the KV-cache path between prefill and decode. Styling is by CSS
class only (the CSP forbids inline styles); every text goes through `escape`.
"""

from __future__ import annotations

from typing import Union

from markupsafe import Markup, escape

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.plan.topology import DeploymentPlan, as_plan
from components.render.outputs import serve_service_name

WIDTH = 760
HEIGHT = 340


def _text(x: float, y: float, body: str, cls: str = "arch-text", anchor: str = "middle") -> str:
    return f'<text x="{x:.0f}" y="{y:.0f}" class="{cls}" text-anchor="{anchor}">{escape(body)}</text>'


def _box(x: float, y: float, w: float, h: float, cls: str, lines: list[tuple[str, str]], stacked: int = 1) -> str:
    parts = []
    # Several nodes read as a small stack of cards behind the front one.
    for depth in range(min(stacked, 3) - 1, 0, -1):
        offset = depth * 5
        parts.append(
            f'<rect x="{x + offset:.0f}" y="{y - offset:.0f}" width="{w:.0f}" height="{h:.0f}" '
            f'rx="8" class="{cls} arch-shadow"/>'
        )
    parts.append(f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" rx="8" class="{cls}"/>')
    line_y = y + 22
    for body, text_cls in lines:
        parts.append(_text(x + w / 2, line_y, body, text_cls))
        line_y += 19
    return "".join(parts)


def _arrow(x1: float, y1: float, x2: float, y2: float, cls: str = "arch-arrow", marker: str = "arch-head") -> str:
    return (
        f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" class="{cls}" '
        f'marker-end="url(#{marker})"/>'
    )


def _phase_lines(plan: DeploymentPlan, phase: str) -> tuple[list[tuple[str, str]], int]:
    group = plan.group_for(phase)
    settings = plan.spec.phases[phase]
    hardware = settings.hardware
    parallel = f"TP{settings.tensor_parallel_size}"
    if settings.pipeline_parallel_size > 1:
        parallel += f" × PP{settings.pipeline_parallel_size}"
    nodes = "node" if settings.nodes == 1 else "nodes"
    replicas = "replica" if settings.replicas == 1 else "replicas"
    lines = [
        (f"{phase.capitalize()}", "arch-title"),
        (f"{settings.nodes} {nodes} × {settings.instance_type}", "arch-text"),
        (f"{hardware.gpus}× {hardware.gpu_model} per node · node group {group.name}", "arch-small"),
        (f"{settings.replicas} vLLM {replicas} · {parallel}", "arch-text"),
    ]
    return lines, settings.nodes


def architecture_svg(plan: Union[DeploymentPlan, DeploymentSpec]) -> Markup:
    """The picture of a deployment plan (given a spec, it plans it)."""
    plan = as_plan(plan)
    spec = plan.spec
    parts: list[str] = [
        f'<svg class="arch" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" xmlns="http://www.w3.org/2000/svg" '
        f'aria-labelledby="arch-title"><title id="arch-title">Architecture of {escape(spec.stack)}</title>',
        '<defs>'
        '<marker id="arch-head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arch-head"/></marker>'
        '<marker id="arch-kv-head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" markerHeight="6" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" class="arch-kv-head"/></marker>'
        '</defs>',
    ]
    port = defaults.SERVE_PORT
    # Client -> endpoint -> system node.
    parts.append(_box(16, 40, 150, 70, "arch-client", [
        ("Client", "arch-title"), ("OpenAI API", "arch-small"), (f"port-forward :{port}", "arch-small"),
    ]))
    system_x, system_w = 240, 300
    system = spec.system_nodes
    parts.append(_box(system_x, 16, system_w, 118, "arch-system", [
        (f"System node{'s' if system.count > 1 else ''} · {system.count} × {system.instance_type}", "arch-title"),
        ("KubeRay operator", "arch-text"),
        ("Ray head (CPU only) · Serve ingress", "arch-text"),
        (f"svc/{serve_service_name(spec)}:{port} /v1", "arch-mono"),
        ("label role=system", "arch-small"),
    ], stacked=system.count))
    parts.append(_arrow(166, 75, system_x - 4, 75))
    # The one AZ holding every GPU node.
    zone = spec.availability_zone or f"one AZ of {spec.region}"
    parts.append(f'<rect x="16" y="168" width="{WIDTH - 32}" height="160" rx="10" class="arch-zone"/>')
    parts.append(_text(28, 186, f"{zone} · EFA cannot cross availability zones", "arch-zone-label", "start"))
    if spec.mode == "colocated":
        lines, nodes = _phase_lines(plan, "colocated")
        parts.append(_box(190, 202, 380, 104, "arch-gpu", lines, stacked=nodes))
        parts.append(_arrow(390, 134, 390, 198))
    else:
        prefill_lines, prefill_nodes = _phase_lines(plan, "prefill")
        decode_lines, decode_nodes = _phase_lines(plan, "decode")
        parts.append(_box(40, 202, 270, 104, "arch-gpu arch-prefill", prefill_lines, stacked=prefill_nodes))
        parts.append(_box(450, 202, 270, 104, "arch-gpu arch-decode", decode_lines, stacked=decode_nodes))
        parts.append(_arrow(330, 134, 190, 198))
        parts.append(_arrow(450, 134, 580, 198))
        kv = spec.kv_transfer
        path = "NIXL over EFA" if kv.backend == "LIBFABRIC" else "NIXL (UCX: TCP speed on EFA)"
        parts.append(_arrow(312, 262, 446, 262, "arch-kv", "arch-kv-head"))
        parts.append(_text(380, 244, "KV cache", "arch-kv-label"))
        parts.append(_text(380, 284, path, "arch-small"))
        parts.append(_text(380, 300, kv.backend, "arch-mono"))
    parts.append("</svg>")
    return Markup("".join(parts))

