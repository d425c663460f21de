"""`python -m serve.render --config Pulumi.<stack>.yaml [--stack NAME] [--output FILE]`

Prints the Ray Serve config of a stack as YAML, for `serve deploy` on any Ray cluster (a laptop, an
existing KubeRay cluster, Anyscale), without Pulumi or a cloud account. Exit 0 on success; exit 2
with one `field: message` line per problem on stderr when the stack file is invalid.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional, Sequence

from components.config.errors import SpecError
from components.config.spec import DeploymentSpec
from components.config.stack_file import add_stack_arguments, read_stack
from components.plan.scaling import plan_warnings
from components.plan.topology import plan_deployment
from components.render.serve_config import render_serve_config_yaml

EXIT_INVALID = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m serve.render",
        description="Render the Ray Serve config (YAML) of a raypd stack file.",
    )
    add_stack_arguments(parser)
    parser.add_argument("--output", help="write the YAML to this file instead of stdout")
    return parser


def render_file(config_path: str, stack: Optional[str] = None) -> tuple[str, list[str]]:
    """Return (Serve YAML, the plan's warnings); raises SpecError on invalid input."""
    name, config, _secret_keys = read_stack(config_path, stack)
    spec = DeploymentSpec.from_config(config, name)
    plan = plan_deployment(spec)
    return render_serve_config_yaml(plan), plan_warnings(plan)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        text, warnings = render_file(args.config, args.stack)
    except SpecError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        return EXIT_INVALID
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"--output: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INVALID
    return 0


if __name__ == "__main__":
    sys.exit(main())
