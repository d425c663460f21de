"""The one error type of serve.kube and its kinds; none ever carries a token or the kubeconfig."""

from __future__ import annotations

from typing import Optional


class KubeError(Exception):
    """A readable failure of a Kubernetes API call; never carries the token or the kubeconfig."""

    def __init__(self, message: str, *, status: Optional[int] = None):
        self.status = status
        super().__init__(message)


class KubeUnreachable(KubeError):
    """No answer at all (refused, timed out, DNS, TLS): callers stop asking after the first one."""


class KubeConfigError(KubeError):
    """The kubeconfig itself cannot be used (not YAML, no context, an exec we will not run...)."""


class KubeNotFound(KubeError):
    """HTTP 404 from the API server for an object (not for a proxied path)."""


class KubeConflict(KubeError):
    """HTTP 409 for a write whose resourceVersion is no longer the object's: someone wrote first."""
