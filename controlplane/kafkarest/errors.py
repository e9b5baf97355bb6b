"""Errors as Confluent's REST Proxy reports them: ``{"error_code": int, "message": str}``.

``error_code`` is the HTTP status, or the status followed by two digits that say which failure it was
(40401 topic not found, 42206 bad payload...). Clients branch on it, so the numbers are Confluent's.
"""

from __future__ import annotations

import math
from typing import Any

from confluent_kafka import KafkaError
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response

from controlplane.core.errors import ApplicationError

BAD_REQUEST = 400
UNAUTHORIZED = 401
FORBIDDEN = 403
NOT_FOUND = 404
PAYLOAD_TOO_LARGE = 413
NOT_ACCEPTABLE = 406
UNSUPPORTED_MEDIA_TYPE = 415
UNPROCESSABLE_ENTITY = 422  # a constraint violation without a code of its own (rest-utils' mapper)
TOPIC_NOT_FOUND = 40401
PARTITION_NOT_FOUND = 40402
CONSUMER_INSTANCE_NOT_FOUND = 40403
LEADER_NOT_AVAILABLE = 40404
CONSUMER_GROUP_NOT_FOUND = 40405
TRANSACTION_NOT_FOUND = 40406  # ours: Confluent's proxy serves no transactions
CONSUMER_FORMAT_MISMATCH = 40601
CONSUMER_ALREADY_SUBSCRIBED = 40901
CONSUMER_ALREADY_EXISTS = 40902
ILLEGAL_STATE = 40903
INVALID_CONSUMER_CONFIG = 42204
UNSUPPORTED_SCHEMA = 42205
INVALID_PAYLOAD = 42206
PRODUCE_BATCH_INVALID = 42208
RATE_LIMITED = 42901
KAFKA_ERROR = 50002
KAFKA_RETRIABLE = 50003
BROKER_NOT_AVAILABLE = 50302
KAFKA_AUTHENTICATION = 40101
KAFKA_AUTHORIZATION = 40301


def http_status(error_code: int) -> int:
    return error_code // 100 if error_code >= 1000 else error_code


class RestError(Exception):
    """A failure to report to a REST Proxy client; raised by the kafkarest services."""

    def __init__(self, error_code: int, message: str, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message
        self.retry_after = retry_after  # seconds, for a 429 (the Retry-After header)

    @property
    def status(self) -> int:
        return http_status(self.error_code)

    def body(self) -> dict[str, Any]:
        return {"error_code": self.error_code, "message": self.message}


def topic_denied(topic: str) -> RestError:
    """The broker refused the caller's principal on ``topic`` (Confluent REST Proxy's body)."""
    return RestError(KAFKA_AUTHORIZATION, f"Not authorized to access topics: [{topic}]")


def rest_error_for(error: KafkaError, topic: str = "") -> RestError:
    """A Kafka error (by librdkafka's names: the v2 consumers' librdkafka errors, and the produce engine's
    ``AdminError`` codes through ``produce.engine.rest_error``) as the REST Proxy reports it."""
    code = error.code()
    if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
        return topic_denied(topic)
    if code == KafkaError.GROUP_AUTHORIZATION_FAILED:
        return RestError(KAFKA_AUTHORIZATION, f"Not authorized to access the consumer group: {error.str()}")
    if code in (KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED):
        return RestError(KAFKA_AUTHORIZATION, f"Not authorized: {error.str()}")
    if code == KafkaError.SASL_AUTHENTICATION_FAILED or code == KafkaError._AUTHENTICATION:
        return RestError(KAFKA_AUTHENTICATION, f"The cluster refused the proxy's credentials: {error.str()}")
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return RestError(TOPIC_NOT_FOUND, "Topic not found.")
    if code == KafkaError._UNKNOWN_PARTITION:
        return RestError(PARTITION_NOT_FOUND, "Partition not found.")
    if code in (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE):
        return RestError(PAYLOAD_TOO_LARGE, f"Record too large for the topic: {error.str()}")
    if code == KafkaError.INVALID_RECORD:
        return RestError(INVALID_PAYLOAD, f"Payload error. {error.str()}")
    if error.retriable() or code in (KafkaError._MSG_TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
        return RestError(KAFKA_RETRIABLE, f"Retriable Kafka error: {error.name()}: {error.str()}")
    return RestError(KAFKA_ERROR, f"Kafka error: {error.name()}: {error.str()}")


def as_rest_error(exc: Exception) -> RestError | None:
    """Map a framework or service exception to its REST Proxy error (None: a server bug, let it 500)."""
    if isinstance(exc, RestError):
        return exc
    if isinstance(exc, ApplicationError):
        return RestError(exc.http_status, exc.message)
    if isinstance(exc, Http404):
        return RestError(NOT_FOUND, "Not found.")
    if isinstance(exc, DjangoPermissionDenied):
        return RestError(FORBIDDEN, "Permission denied.")
    if isinstance(exc, exceptions.NotAcceptable):
        return RestError(NOT_ACCEPTABLE, "HTTP 406 Not Acceptable")
    if isinstance(exc, exceptions.Throttled):
        return RestError(RATE_LIMITED, _flatten(exc.detail))
    if isinstance(exc, exceptions.ValidationError):
        return RestError(INVALID_PAYLOAD, f"Payload error. {_flatten(exc.detail)}")
    if isinstance(exc, exceptions.APIException):
        return RestError(exc.status_code, _flatten(exc.detail))
    return None


def _flatten(detail: Any) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_flatten(value)}" for key, value in detail.items())
    if isinstance(detail, list):
        return " ".join(_flatten(item) for item in detail)
    return str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF hook for the REST Proxy views (the management API keeps its own error body)."""
    error = as_rest_error(exc)
    if error is None:
        return None
    response = Response(error.body(), status=error.status)
    access = getattr(context.get("view"), "access", None)
    if access is not None and error.status == FORBIDDEN:
        from controlplane.kafkarest.access import audit_refusal  # noqa: PLC0415 - access imports this module

        kwargs = (context.get("kwargs") or {})
        audit_refusal(access, error, surface="rest", topic=str(kwargs.get("topic_name") or kwargs.get("topic") or ""))
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        response["WWW-Authenticate"] = 'Basic realm="sluice"'
    wait = getattr(exc, "wait", None)
    if wait is not None:
        response["Retry-After"] = str(math.ceil(wait))
    return response
