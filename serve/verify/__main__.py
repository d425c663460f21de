"""`python -m serve.verify --outputs FILE|- [--kubeconfig FILE] [--endpoint URL] [--api-key-file FILE] [--json]`.

Runs every verify check (serve/verify/run.py) and prints the report, or with --json the report as
JSON (Contract 5). Exit 0 when no check failed, 1 when one did, 2 on invalid input (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from components.config.checks import write_report
from serve.evidence import VerifyInputError, read_outputs
from serve.kube import KubeConfigError, read_kubeconfig_file
from serve.verify.external import read_api_key
from serve.verify.run import run_verify

EXIT_INVALID = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m serve.verify",
        description="Verify a deployed raypd stack through the Kubernetes API.")
    parser.add_argument("--outputs", required=True,
                        help="stack outputs JSON file (`pulumi stack output --json --show-secrets`), "
                             "or - for stdin")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: the outputs' kubeconfig)")
    parser.add_argument("--endpoint", help="OpenAI base URL to test instead of the Serve Service "
                                           "proxy, e.g. http://localhost:8000/v1")
    parser.add_argument("--api-key-file", help="a file holding an API key for endpoint-external (default: "
                                               "$RAYPD_API_KEY, else the outputs' apiKey)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (Contract 5)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        outputs = read_outputs(args.outputs)
        kubeconfig = read_kubeconfig_file(args.kubeconfig) if args.kubeconfig else None
        report = run_verify(outputs, kubeconfig, args.endpoint, api_key=read_api_key(args.api_key_file))
    except (VerifyInputError, KubeConfigError) as exc:
        print(f"verify: {exc}", file=sys.stderr)
        return EXIT_INVALID
    return write_report(report, args.json, sys.stdout)



if __name__ == "__main__":
    sys.exit(main())
