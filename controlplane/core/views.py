"""Unauthenticated operational endpoints."""

from __future__ import annotations

from dataclasses import asdict

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.core.health import health_check


class HealthView(APIView):
    """Postgres, Redis and a Celery worker, each checked for real. 503 when any part is down."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    @extend_schema(responses={200: inline_serializer("Health", {
        "status": serializers.CharField(), "parts": serializers.DictField()})})
    def get(self, request: Request) -> Response:
        parts = health_check()
        healthy = all(part.ok for part in parts)
        body = {"status": "ok" if healthy else "degraded",
                "parts": {part.name: {k: v for k, v in asdict(part).items() if k != "name"} for part in parts}}
        return Response(body, status=200 if healthy else 503)
