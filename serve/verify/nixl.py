"""Verify check `nixl-backend`: every engine's NIXL agent instantiated the requested KV transfer
backend and no other (formats: serve/kv_evidence.py). The engines' logs come from Ray's log API
(the replica actor's files and its node's RayWorkerWrapper actors', serve/evidence/cluster.py), else from
the worker pods' container logs."""

from __future__ import annotations

from components.config.checks import Check
from serve.evidence import Evidence, name_list, name_of, shorten
from serve.kube import KubeError
from serve.kv_evidence import backends_in, unsupported_backends_in
from serve.verify.report import TITLES


def check_nixl_backend(ev: Evidence) -> Check:
    cid, title = "nixl-backend", TITLES["nixl-backend"]
    want = ev.plan.kv_backend
    if want is None:
        return Check.skipped(cid, title, "colocated mode: no NIXL transfer")
    seen: dict[str, set[str]] = {}
    refused: set[str] = set()
    sources: set[str] = set()
    try:
        for phase, replicas in ev.engine_replicas().items():
            for replica in replicas:
                if replica.get("state") != "RUNNING":
                    continue
                label = f"{ev.plan.phases[phase].deployment} {replica.get('replica_id', '?')}"
                text, where = ev.engine_log(replica)
                seen[label] = backends_in(text)
                refused.update(unsupported_backends_in(text))
                sources.add(where)
        if not seen:
            raise KubeError("no RUNNING engine replica to read")
        source = f"Ray log API ({'; '.join(sorted(sources))})"
    except KubeError as ray_error:
        source = f"worker pods' container logs (Ray log API: {shorten(str(ray_error), 120)})"
        seen = {}
        try:
            for pod in ev.worker_pods():
                text = ev.pod_log(pod)
                seen[f"pod {name_of(pod)}"] = backends_in(text)
                refused.update(unsupported_backends_in(text))
        except KubeError as exc:
            return Check.warned(cid, title, f"no logs to read: {exc}",
                                "check the Ray dashboard's logs for 'Backend ... was instantiated'")
    wrong = {label: sorted(b - {want}) for label, b in seen.items() if b - {want}}
    silent = [label for label, b in seen.items() if not b]
    if want in refused and not wrong:
        return Check.failed(cid, title, f"NIXL could not create the {want} backend ('createBackend: "
                            f"unsupported backend '{want}''): the engine cannot start its KV "
                            f"connector; source: {source}",
                            "LIBFABRIC needs the EFA device and libfabric in the image (and on NIXL 1.5 "
                            "its plugin loads CUDA): check efa-devices and the image's NIXL build")
    if wrong:
        detail = "; ".join(f"{label}: Backend {', '.join(b)} was instantiated"
                           + (f" alongside {want}" if want in seen[label] else "") for label, b in wrong.items())
        fallback = " (UCX is the silent TCP-speed fallback)" if want == "LIBFABRIC" else ""
        return Check.failed(cid, title, f"{detail}, but {want} was asked{fallback}; source: {source}",
                            "set kv_connector_extra_config.backends to [LIBFABRIC] and FI_PROVIDER=efa "
                            "on the workers, and make sure the pods request vpc.amazonaws.com/efa")
    found = [label for label, b in seen.items() if want in b]
    if not found or silent:
        return Check.warned(cid, title, f"no 'Backend {want} was instantiated' line for "
                            f"{name_list(silent) or 'any engine'}; source: {source}",
                            "the line is printed once at engine start and may have rotated out of "
                            "the log tail; look in the Ray dashboard's logs of the engine's worker")
    return Check.passed(cid, title, f"'Backend {want} was instantiated' in the logs of "
                        f"{name_list(found)}; no other backend; source: {source}")
