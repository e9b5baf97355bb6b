"""One error family and one error body for the whole API.

Every error response is ``{"code": str, "message": str, "extra": dict}``;
``code`` is stable and documented, so clients branch on it, never on prose.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class ApplicationError(Exception):
    """A business-rule failure raised by a service; rendered as a 4xx."""

    code: str = "application_error"
    http_status: int = status.HTTP_400_BAD_REQUEST

    def __init__(self, message: str, *, code: str | None = None, extra: dict[str, Any] | None = None,
                 http_status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if http_status is not None:
            self.http_status = http_status
        self.extra = extra or {}


class ValidationFailed(ApplicationError):
    """Input that breaks a rule; ``fields`` maps each offending field to its messages."""

    code = "validation_error"

    def __init__(self, fields: dict[str, list[str]], message: str | None = None) -> None:
        if message is None:
            message = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in fields.items())
        super().__init__(message, extra={"fields": fields})


class Conflict(ApplicationError):
    code = "conflict"
    http_status: int = status.HTTP_409_CONFLICT


class QuotaExceeded(ApplicationError):
    code = "quota_exceeded"


# DRF exception classes → our stable codes.
_DRF_CODES: dict[type[exceptions.APIException], str] = {
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.AuthenticationFailed: "authentication_failed",
    exceptions.PermissionDenied: "permission_denied",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.ParseError: "parse_error",
    exceptions.Throttled: "throttled",
    exceptions.ValidationError: "validation_error",
}


def error_body(code: str, message: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "extra": extra or {}}


def _flatten_detail(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """Turn DRF's nested error detail into ``{"field.sub": [messages]}``."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = key if key != "non_field_errors" else "non_field_errors"
            out.update(_flatten_detail(value, f"{prefix}.{name}" if prefix else str(name)))
    elif isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            out[prefix or "non_field_errors"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                out.update(_flatten_detail(item, f"{prefix}[{index}]" if prefix else f"[{index}]"))
    else:
        out[prefix or "non_field_errors"] = [str(detail)]
    return out


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF hook: render every error as the one body."""
    if isinstance(exc, ApplicationError):
        return Response(error_body(exc.code, exc.message, exc.extra), status=exc.http_status)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # an unexpected error: Django's 500 path (see urls.handler500)
    assert isinstance(exc, exceptions.APIException)
    code = next((c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), "error")
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten_detail(exc.detail)
        message = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in fields.items())
        response.data = error_body(code, message or "Invalid input.", {"fields": fields})
    else:
        detail = exc.detail
        message = str(detail) if not isinstance(detail, (dict, list)) else "Request failed."
        extra: dict[str, Any] = {}
        wait = getattr(exc, "wait", None)
        if isinstance(exc, exceptions.Throttled) and wait is not None:
            extra["retry_after_seconds"] = wait
        response.data = error_body(code, message, extra)
    return response


def json_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(error_body("not_found", "Not found."), status=404)


def json_server_error(request: HttpRequest) -> JsonResponse:
    return JsonResponse(error_body("server_error", "Internal server error."), status=500)


def json_bad_request(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(error_body("bad_request", "Bad request."), status=400)


def json_permission_denied(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(error_body("permission_denied", "Permission denied."), status=403)
