"""OpenAPI description of API-key authentication (loaded by the app config)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "controlplane.tenancy.authentication.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "<key id>:<secret>",
            "description": "An API key: `Authorization: Bearer <key id>:<secret>` "
                           "(HTTP Basic with the same pair is accepted too).",
        }
