"""Errors as Confluent's Schema Registry reports them: ``{"error_code": int, "message": str}``.

The HTTP status is the code's first three digits (40401 → 404). Clients such as Confluent's serializers branch
on the numbers, so they are Confluent's (checked against its docs and Karapace's ``SchemaErrorCodes``).
"""

from __future__ import annotations

from typing import Any

BAD_REQUEST = 400
UNAUTHORIZED = 40101
FORBIDDEN = 40301
NOT_FOUND = 404
METHOD_NOT_ALLOWED = 405
PAYLOAD_TOO_LARGE = 413
UNSUPPORTED_MEDIA_TYPE = 415
SUBJECT_NOT_FOUND = 40401
VERSION_NOT_FOUND = 40402
SCHEMA_NOT_FOUND = 40403
SUBJECT_SOFT_DELETED = 40404
SUBJECT_NOT_SOFT_DELETED = 40405
VERSION_SOFT_DELETED = 40406
VERSION_NOT_SOFT_DELETED = 40407
SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
SUBJECT_MODE_NOT_CONFIGURED = 40409
INCOMPATIBLE_SCHEMA = 409
INVALID_SCHEMA = 42201
INVALID_VERSION = 42202
INVALID_COMPATIBILITY_LEVEL = 42203
INVALID_MODE = 42204
OPERATION_NOT_PERMITTED = 42205
REFERENCE_EXISTS = 42206
STORE_ERROR = 50001


class RegistryError(Exception):
    """A failure to report to a Schema Registry client; raised by the registry's services and selectors."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message

    @property
    def status(self) -> int:
        return self.error_code // 100 if self.error_code >= 1000 else self.error_code

    def body(self) -> dict[str, Any]:
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(SUBJECT_NOT_FOUND, f"Subject '{subject}' not found.")


def version_not_found(version: int | str) -> RegistryError:
    return RegistryError(VERSION_NOT_FOUND, f"Version {version} not found.")


def schema_not_found(schema_id: int | str) -> RegistryError:
    return RegistryError(SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")


def invalid_version(text: str) -> RegistryError:
    return RegistryError(INVALID_VERSION, f"The specified version '{text}' is not a valid version id. Allowed values "
                                          "are between [1, 2^31-1] and the string \"latest\"")


def invalid_compatibility() -> RegistryError:
    return RegistryError(INVALID_COMPATIBILITY_LEVEL,
                         "Invalid compatibility level. Valid values are none, backward, forward, full, "
                         "backward_transitive, forward_transitive, and full_transitive")


def invalid_mode() -> RegistryError:
    return RegistryError(INVALID_MODE, "Invalid mode. Valid values are READWRITE, READONLY and IMPORT.")
