"""What a change of `raypd:endpoint` does, for the change preview (components.changes.assess).

Read with the rules of what acts on each object:

- Pulumi updates the EnvoyProxy, the Gateway, the routes and the policies in place (custom
  resources: a changed spec is a patch); Envoy Gateway then reconfigures the proxies without
  dropping established connections. Its proxy Service is a ClusterIP in every scope.
- The NLB belongs to raypd's own LoadBalancer Service, one per scope (components.render.endpoint_lb,
  components.stack.endpoint_stack). cluster -> vpc/internet creates it; `up` waits until the
  controller has written the new NLB's name into it, and `endpoint.url` is that name.
  vpc <-> internet (an NLB's scheme cannot change: the controller would replace it,
  aws-load-balancer-controller pkg/deploy/elbv2/load_balancer_synthesizer.go
  `isSDKLoadBalancerRequiresReplacement`) creates the other scope's Service and NLB first, then
  deletes the old Service and waits for its NLB to be deleted. A new NLB has a new DNS name: the
  `endpoint.url` output changes and clients of the old name lose the endpoint until they move (or
  until the DNS record of `raypd:endpoint.host` points at the new one). Serving inside the cluster
  is not interrupted.
- vpc/internet -> cluster deletes the Service first and waits until the controller has deleted
  the NLB, its target groups and security groups (its finalizer); only then is the controller's
  release removed, so nothing is left behind in AWS.
- Source ranges become the NLB security group's rules (in place); a certificate change is a
  listener update (in place); adding or removing the certificate turns the TCP:80 listener into
  TLS:443 or back (a listener replaced on the same NLB: same name, new URL scheme and port).
- auth apiKey -> none deletes the SecurityPolicy and the key Secret (every key is gone); none ->
  apiKey creates a new first key, and callers without a key get 401 at once.
"""

from __future__ import annotations

from components.changes.effects import Effect, Kind
from components.config.endpoint_spec import EndpointSpec

SUBJECT = "raypd:endpoint"


def endpoint_effects(before: EndpointSpec, after: EndpointSpec) -> list[Effect]:
    """Every effect of going from `before` to `after` (empty when nothing changes)."""
    if before == after:
        return []
    effects: list[Effect] = []
    if before.scope != after.scope:
        effects.append(_scope_effect(before, after))
    elif after.load_balanced:
        if before.tls != after.tls:
            effects.append(Effect(f"{SUBJECT}.certificateArn", Kind.IN_PLACE, (
                "the NLB's listener changes between TCP on port 80 and TLS on port 443 (same load "
                "balancer, same name): the URL's scheme changes, so clients must switch between "
                "http:// and https://, and open connections on the old listener are closed")))
        elif before.certificate_arn != after.certificate_arn:
            effects.append(Effect(f"{SUBJECT}.certificateArn", Kind.IN_PLACE, (
                "the TLS listener gets the new certificate in place; open connections keep the old "
                "one until they reconnect")))
        if before.effective_allowed_cidrs != after.effective_allowed_cidrs:
            effects.append(Effect(f"{SUBJECT}.allowedCidrs", Kind.IN_PLACE, (
                "the NLB security group's inbound rules are updated in place; addresses no longer "
                "listed cannot open new connections")))
    if before.auth != after.auth:
        effects.append(Effect(f"{SUBJECT}.auth", Kind.IN_PLACE, (
            "the API-key policy and the key Secret are deleted: every key is gone and anyone who "
            "can reach the endpoint may use it" if after.auth == "none" else
            "an API-key policy and a new first key (output apiKey) are created: requests without "
            "a key get 401 as soon as the policy is in place")))
    if before.host != after.host:
        effects.append(Effect(f"{SUBJECT}.host", Kind.NO_SERVING_EFFECT, (
            "only the endpoint.url output (and the certificate the preflight expects) change; "
            "point the name's DNS record at the load balancer yourself")))
    return effects


def _scope_effect(before: EndpointSpec, after: EndpointSpec) -> Effect:
    subject = f"{SUBJECT}.scope"
    if not before.load_balanced:
        return Effect(subject, Kind.IN_PLACE, (
            f"cluster -> {after.scope}: the AWS Load Balancer Controller is installed and a "
            f"LoadBalancer Service for the gateway's proxies is created; the controller makes an "
            f"{_scheme(after)} NLB for it (a few minutes; `up` waits for its name) and endpoint.url "
            "becomes that name; in-cluster clients keep working"))
    if not after.load_balanced:
        return Effect(subject, Kind.NEW_LOAD_BALANCER, (
            f"{before.scope} -> cluster: the NLB's Service is deleted and `up` waits until the AWS "
            "Load Balancer Controller has deleted the NLB, its target groups and security groups; "
            "only then is the controller removed. Every client outside the cluster loses the "
            "endpoint; the gateway's ClusterIP Service stays for pods in the cluster"))
    return Effect(subject, Kind.NEW_LOAD_BALANCER, (
        f"{before.scope} -> {after.scope}: an NLB's scheme cannot change, so a new {_scheme(after)} "
        "NLB (other subnets) is created first, with its own Service, and endpoint.url becomes its "
        "name; then the old NLB is deleted. A new DNS name: clients of the old name lose the "
        "endpoint until they move; serving in the cluster is not interrupted"))


def _scheme(endpoint: EndpointSpec) -> str:
    return "internet-facing" if endpoint.scope == "internet" else "internal"
