"""Request bodies that refuse what they do not understand.

A key no field reads was silently dropped before (``{"partitons": 6}`` made a topic with the default count).
Every management-API request serializer derives from :class:`StrictSerializer`: an unknown key is a 400
naming it, in the one error body (``extra.fields``), nested serializers included. Bodiless actions refuse any
body through :func:`refuse_body`. ``tests/controlplane/api/test_unknown_fields.py`` walks every write operation of
the OpenAPI schema, so an endpoint that forgets fails the suite.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any, TypeVar

from rest_framework import serializers
from rest_framework.request import Request

F = TypeVar("F", bound=Callable[..., Any])


def unknown_field_errors(given: Any, known: list[str]) -> dict[str, list[str]]:
    """``{name: [message]}`` for each key of ``given`` not in ``known`` (empty when ``given`` is no object)."""
    if not isinstance(given, Mapping):
        return {}
    listed = ", ".join(known) if known else "none"
    message = f"Unknown field. Known fields: {listed}."
    return {str(name): [message] for name in given if name not in known}


# A request body whose unknown keys are a validation error, reported with any other field's errors. (A comment, not
# a docstring: drf-spectacular would publish a docstring as every request body's description.)
class StrictSerializer(serializers.Serializer[Any]):

    def to_internal_value(self, data: Any) -> Any:
        known = [name for name, field in self.fields.items() if not field.read_only]
        unknown = unknown_field_errors(data, known)
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                raise serializers.ValidationError({**exc.detail, **unknown}) from exc
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


def refuse_body(request: Request) -> None:
    """For an action that takes no body: any key given is unknown (400 naming it)."""
    unknown = unknown_field_errors(request.data, [])
    if unknown:
        raise serializers.ValidationError(unknown)


def bodiless(action: F) -> F:
    """Decorate a view action that reads no body, so one sent with fields is refused rather than ignored."""

    @wraps(action)
    def wrapper(self: Any, request: Request, *args: Any, **kwargs: Any) -> Any:
        if unknown_field_errors(request.data, []) and getattr(self, "detail", False):
            self.get_object()  # another tenant's object is a 404, whatever the body
        refuse_body(request)
        return action(self, request, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
