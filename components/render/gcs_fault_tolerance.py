"""GCS fault tolerance (issue 31 §1): the RayService's `gcsFaultToleranceOptions` and the shape of
the managed Redis behind it, as plain values (components.stack.gcs_store creates the resources).

What KubeRay 1.4 does with the options (ray-operator/controllers/ray/common/pod.go,
`configureGCSFaultTolerance`, v1.4.0): on the head it sets RAY_REDIS_ADDRESS from `redisAddress`,
REDIS_PASSWORD from `redisPassword` (its `valueFrom.secretKeyRef` copied into the env, so the
password never appears in the RayService) and `redis-password: $REDIS_PASSWORD` in the head's
rayStartParams; on every worker RAY_GCS_RPC_SERVER_RECONNECT_TIMEOUT_S=600, so a raylet waits ten
minutes for a new head instead of 60 s. KubeRay's validation (utils/validation.go,
`ValidateRayClusterSpec`) refuses a head that also sets RAY_REDIS_ADDRESS, REDIS_PASSWORD,
`redis-password` or the `ray.io/external-storage-namespace` annotation: raypd sets none of them.

TLS: Ray's `start_gcs_server` (python/ray/_private/services.py) passes `--redis_enable_ssl=true`
for a `rediss://` address, and the GCS's Redis client (src/ray/gcs/store_client/redis_context.cc)
builds its hiredis TLS context from RAY_REDIS_CA_CERT / RAY_REDIS_CA_PATH when set, else from
nothing, which hiredis (ssl.c, `redisCreateSSLContextWithOptions`) answers with OpenSSL's default
verify paths: the image's system trust store. ElastiCache's in-transit certificates chain to
Amazon's public root CAs, which that store holds, so `rediss://` alone is right and no CA bundle is
mounted. KubeRay's Redis clean-up Job reads the same scheme (`use_ssl=parsed.scheme=='rediss'`,
raycluster_controller.go v1.4.0).

The storage namespace is left to KubeRay on purpose: by default it is the RayCluster's UID
(pod.go: `storageNS := string(instance.UID)`), which a head pod restart keeps (same RayCluster)
and a new RayCluster changes. That is what both rollouts need: a NewCluster upgrade runs the old
and the new cluster side by side, and a shared namespace would hand the new GCS the old cluster's
nodes, actors and placement groups; and when the old RayCluster is deleted KubeRay's finalizer
(`ray.io/gcs-ft-redis-cleanup-finalizer`) runs a Job that deletes its namespace's keys, which
would wipe the new cluster's state. An in-place rebuild (the RayService replaced,
components.stack.pd_service) likewise starts a fresh cluster under a fresh UID. So raypd never
sets `externalStorageNamespace`: one namespace per Ray cluster, stable for its whole life.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from components.config import defaults
from components.config.spec import DeploymentSpec

OPTIONS_KEY = "gcsFaultToleranceOptions"
# The Secret raypd creates (gcs elasticache) for the auth token, in the RayService's namespace.
PASSWORD_SECRET_KEY = "password"
# The ElastiCache primary endpoint is known only once the replication group exists; the renderer
# writes this stand-in, and the stack puts the real host in (with_redis_host). Not a valid host
# name, so a manifest that was never filled in cannot reach any Redis.
ELASTICACHE_HOST_PLACEHOLDER = "ELASTICACHE_PRIMARY_ENDPOINT"
# ElastiCache auth tokens: 16-128 printable ASCII characters without / " @ or spaces (ElastiCache
# "Authenticating with the Valkey and Redis OSS AUTH command"). Letters and digits only, so the token
# is safe in the shell line KubeRay builds (`--redis-password=$REDIS_PASSWORD`).
AUTH_TOKEN_LENGTH = 64


def redis_secret_name(spec: DeploymentSpec) -> str:
    """Name of the Secret (in spec.namespace, key "password") holding the ElastiCache auth token."""
    return f"{spec.service_name}-gcs-redis"


def _password(spec: DeploymentSpec) -> Optional[dict[str, Any]]:
    if spec.gcs_store == "elasticache":
        name, key = redis_secret_name(spec), PASSWORD_SECRET_KEY
    elif spec.fault_tolerance.password_secret is not None:
        name, key = spec.fault_tolerance.password_secret
    else:
        return None
    return {"valueFrom": {"secretKeyRef": {"name": name, "key": key}}}


def gcs_fault_tolerance_options(spec: DeploymentSpec) -> dict[str, Any]:
    """`{"gcsFaultToleranceOptions": {...}}` for rayClusterConfig, or {} with gcs off."""
    store = spec.gcs_store
    if store == "off":
        return {}
    if store == "elasticache":
        address = f"rediss://{ELASTICACHE_HOST_PLACEHOLDER}:{defaults.REDIS_PORT}"
    else:
        assert spec.fault_tolerance.redis_address is not None  # validated: required for external
        address = spec.fault_tolerance.redis_address
    options: dict[str, Any] = {"redisAddress": address}
    password = _password(spec)
    if password is not None:
        options["redisPassword"] = password
    return {OPTIONS_KEY: options}


def with_redis_host(rayservice_spec: dict[str, Any], host: str) -> dict[str, Any]:
    """The RayService's `spec` with the ElastiCache primary endpoint in place of the stand-in
    (a copy; unchanged when the stack runs no ElastiCache)."""
    filled = copy.deepcopy(rayservice_spec)
    options = filled.get("rayClusterConfig", {}).get(OPTIONS_KEY)
    if options is not None:
        options["redisAddress"] = options["redisAddress"].replace(ELASTICACHE_HOST_PLACEHOLDER, host)
    return filled


def replication_group_settings(spec: DeploymentSpec) -> dict[str, Any]:
    """Keyword arguments of `aws.elasticache.ReplicationGroup` (no Pulumi objects: the stack adds
    the auth token, subnet group and security group).

    One shard (cluster mode off: Ray's GCS client talks to one Redis endpoint), a primary and a
    replica in the two zones with automatic failover, so a node failure costs a failover of seconds,
    not the GCS; TLS required in transit and encryption at rest; AUTH with the token; no
    snapshots (the GCS's tables matter only while their Ray cluster lives)."""
    return {
        "description": f"raypd {spec.stack}: Ray GCS fault tolerance for {spec.service_name}",
        "engine": defaults.GCS_CACHE_ENGINE,
        "engine_version": defaults.GCS_CACHE_ENGINE_VERSION,
        "parameter_group_name": defaults.GCS_CACHE_PARAMETER_GROUP,
        "node_type": spec.fault_tolerance.cache_node_type,
        "num_cache_clusters": defaults.GCS_CACHE_NODES,
        "automatic_failover_enabled": True,
        "multi_az_enabled": True,
        "port": defaults.REDIS_PORT,
        "transit_encryption_enabled": True,
        "transit_encryption_mode": "required",
        "at_rest_encryption_enabled": True,
        "snapshot_retention_limit": 0,
        "apply_immediately": True,
    }
