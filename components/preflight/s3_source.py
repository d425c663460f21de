"""The `model-source` check for an `s3://` source: ListObjectsV2 of the prefix (it exists, and
holds `config.json` at its top) and HeadObject of that `config.json` (it can be read), with the
preflight's AWS credentials. Both read-only. What S3 says about the bucket or the object fails the
check; S3 not answering from here only warns (the pods read from the stack's network in AWS).
"""

from __future__ import annotations

from typing import Callable, Optional

from botocore.client import BaseClient
from botocore.exceptions import BotoCoreError, ClientError

from components.config.checks import Check
from components.config.spec import DeploymentSpec
from components.preflight.source_verdicts import (
    CHECK_ID,
    CONFIG_FILE,
    SOURCE_KEY,
    TITLE,
    failed,
    one_line,
    passed,
    this_machine,
    warned,
)
from components.render.model_access import S3Location, s3_location


def _s3_text(location: S3Location) -> str:
    return f"s3://{location.bucket}/{location.prefix + '/' if location.prefix else ''}"


def check_s3_source(spec: DeploymentSpec, s3: Optional[Callable[[], BaseClient]],
                    why_not: str = "") -> Check:
    """`model-source` for an s3:// URI. `s3`: makes the S3 client (None: no usable AWS
    credentials, `why_not` says why)."""
    location = s3_location(spec.model.source)
    assert location is not None  # called for s3:// sources only
    where = _s3_text(location)
    if s3 is None:
        return Check.skipped(CHECK_ID, TITLE, f"{where} is read with AWS credentials: {why_not}")
    prefix = f"{location.prefix}/" if location.prefix else ""
    config_key = f"{prefix}{CONFIG_FILE}"
    try:
        client = s3()
        listing = client.list_objects_v2(Bucket=location.bucket, Prefix=prefix, Delimiter="/", MaxKeys=1000)
        keys = [item["Key"] for item in listing.get("Contents", [])]
        folders = [item["Prefix"] for item in listing.get("CommonPrefixes", [])]
        if not keys and not folders:
            return failed(f"{where} holds no objects: the prefix does not exist in bucket {location.bucket}",
                          f"upload the model there, or fix {SOURCE_KEY}")
        if config_key not in keys and not listing.get("IsTruncated"):
            below = f"; sub-folders: {', '.join(f[len(prefix):] for f in folders[:5])}" if folders else ""
            return failed(f"{where} holds no {CONFIG_FILE} at its top ({len(keys)} objects there{below}): "
                          "vLLM loads a model from the folder with its config.json",
                          f"point {SOURCE_KEY} at the folder holding {CONFIG_FILE}")
        head = client.head_object(Bucket=location.bucket, Key=config_key)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", ""))
        if code == "NoSuchBucket":
            return failed(f"bucket {location.bucket} of {where} does not exist",
                          f"fix the bucket name in {SOURCE_KEY}")
        if code in ("404", "NoSuchKey"):
            return failed(f"{where}{CONFIG_FILE} does not exist", f"upload the model's {CONFIG_FILE}")
        if code in ("403", "AccessDenied", "AllAccessDisabled"):
            return warned(f"this identity may not read {where} ({code}); the pods read it with the "
                          "role raypd creates for them, but a bucket policy or KMS key may refuse them too",
                          "grant s3:ListBucket and s3:GetObject on it to check, or check the bucket policy")
        said = one_line(str(error.get("Message", "")), None)
        return warned(f"S3 refused to list {where} ({code or 'error'}: {said})")
    except BotoCoreError as exc:  # connection refused, timeout, DNS: no answer about the bucket
        return warned(f"S3 did not answer from this machine ({this_machine()}, where preflight runs) "
                      f"while listing {where} ({one_line(str(exc), None)}), so nothing was learnt about "
                      "the model: the pods read it through the stack's own network in AWS, which may "
                      "reach S3 where this machine cannot",
                      "nothing to fix if the pods can reach S3; to check it from here, let this machine "
                      "reach S3 (and AWS_ENDPOINT_URL, if set) and rerun")
    size = head.get("ContentLength")
    return passed(f"{where} exists and holds a readable {CONFIG_FILE} ({size} bytes; ListObjectsV2 and "
                  "HeadObject answered)")
