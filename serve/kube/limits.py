"""The bounds every Kubernetes API call and every credential read keeps (see serve/kube/__init__.py)."""

DEFAULT_TIMEOUT = 10.0
# Bodies beyond this are cut: a node list of a big cluster is well under it, a log tail too.
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_KUBECONFIG_BYTES = 1024 * 1024
MAX_TOKEN_FILE_BYTES = 64 * 1024  # a service-account JWT is ~1 KiB; an EKS token ~1.5 KiB
# A PEM file a kubeconfig names (certificate-authority, client-certificate, client-key): a CA
# bundle of every public root is ~200 KiB.
MAX_PEM_FILE_BYTES = 1024 * 1024
