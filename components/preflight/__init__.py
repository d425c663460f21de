"""Preflight: the read-only checks run before `pulumi up` (`python -m components.preflight`, cli.py),
each answering a question a failed deploy would otherwise answer 20 minutes in. run.py runs them in
order; credentials.py (with admin_access.py), placement.py, quota.py, model_source.py (with
hub_endpoint.py, s3_source.py and source_verdicts.py) and certificate.py hold the checks, context.py
what they share, aws.py the thin boto3 layer that asks AWS. It may import components.config, plan,
render, changes (the update's peak, from the change preview) and itself, never pulumi or the stack
program."""
