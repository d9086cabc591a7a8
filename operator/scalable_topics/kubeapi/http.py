"""Reading a request's parameters and writing JSON answers, the API server's way."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from aiohttp import web

from .admission import FieldValidation, parse_field_validation
from .status import ApiError, Reason

JSON = "application/json"
MAX_BODY_BYTES = 3 * 1024 * 1024  # the API server's request limit


def json_response(body: Any, status: int = 200, warnings: Iterable[str] = ()) -> web.Response:
    response = web.Response(body=encode(body), status=status, content_type=JSON, charset=None)
    for warning in warnings:
        response.headers.add("Warning", warning_header(warning))
    return response


def error_response(error: ApiError) -> web.Response:
    response = json_response(error.status(), error.code)
    if error.retry_after_seconds is not None:
        response.headers["Retry-After"] = str(error.retry_after_seconds)
    return response


def warning_header(text: str) -> str:
    """RFC 7234 warn-code 299, the form kubectl prints as ``Warning: <text>``."""
    return f'299 - "{text.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'


def encode(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})
# aiohttp reports a request without a Content-Type as application/octet-stream: taken as JSON,
# as curl users expect.
BODY_TYPES = YAML_TYPES | {"application/json", "application/octet-stream"}


async def read_json(request: web.Request) -> Any:
    raw = await request.read()
    if not raw:
        raise ApiError(400, Reason.BAD_REQUEST, "the request has no body")
    content_type = request.content_type
    if content_type not in BODY_TYPES:
        # kubectl's generators (``kubectl create namespace NAME``) send built-in kinds as
        # protobuf, which this server does not decode: kube-apiserver's answer to a type it
        # cannot read, and what to do instead.
        raise ApiError(
            415,
            Reason.UNSUPPORTED_MEDIA_TYPE,
            f"request bodies of type {content_type!r} are not served, only JSON and YAML "
            "(for a Namespace, apply a manifest instead of kubectl create namespace)",
        )
    try:
        if content_type in YAML_TYPES:
            import yaml

            return yaml.safe_load(raw)
        return json.loads(raw)
    except ValueError as exc:
        raise ApiError(
            400, Reason.BAD_REQUEST, f"the request body is not valid JSON: {exc}"
        ) from exc
    except Exception as exc:  # yaml's errors are not ValueErrors
        raise ApiError(400, Reason.BAD_REQUEST, f"the request body is not valid: {exc}") from exc


def flag(request: web.Request, name: str) -> bool:
    value = request.query.get(name, "")
    if value in ("", "false", "0"):
        return False
    if value in ("true", "1"):
        return True
    raise ApiError(400, Reason.BAD_REQUEST, f"{name} must be true or false, not {value!r}")


def integer(request: web.Request, name: str, *, minimum: int = 0) -> int | None:
    value = request.query.get(name)
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise ApiError(
            400, Reason.BAD_REQUEST, f"{name} must be an integer >= {minimum}, not {value!r}"
        )
    return number


def field_validation(request: web.Request, options_kind: str) -> FieldValidation:
    return parse_field_validation(request.query.get("fieldValidation"), options_kind)


def dry_run(request: web.Request) -> bool:
    """``dryRun=All``: every check of the write, and its answer, without writing."""
    values = request.query.getall("dryRun", [])
    if not values:
        return False
    if values != ["All"]:
        raise ApiError(
            400,
            Reason.BAD_REQUEST,
            f'Unsupported value: "{values[0]}": supported values: "All"',
        )
    return True
