"""The preflight's command line (components.preflight.run does the checking):

    python -m components.preflight --config Pulumi.<stack>.yaml [--stack NAME] [--json]

Prints the report (or, with --json, the Contract 5 document). Exit codes: 0 no fail, 1 a fail,
2 invalid configuration (each problem on its own line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from components.config.checks import write_report
from components.config.errors import SpecError
from components.config.spec import DeploymentSpec
from components.config.stack_file import add_stack_arguments, read_stack
from components.preflight.run import run_preflight

EXIT_INVALID = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.preflight",
        description="Check an AWS account and region can host a raypd stack (read-only AWS calls).",
    )
    add_stack_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the Contract 5 report as JSON")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        stack, config, _secret_keys = read_stack(args.config, args.stack)
        spec = DeploymentSpec.from_config(config, stack)
    except SpecError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        return EXIT_INVALID
    report = run_preflight(spec)
    return write_report(report, args.json, sys.stdout)
