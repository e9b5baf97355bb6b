"""Session login for the web console (API clients use keys instead)."""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib.auth import authenticate, login, logout
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle, SimpleRateThrottle
from rest_framework.views import APIView

from controlplane.core.errors import ApplicationError


class LoginUsernameThrottle(SimpleRateThrottle):
    """Login attempts per username, whatever address they come from (a guessing flood spread over many)."""

    scope = "login_user"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        username = request.data.get("username") if hasattr(request.data, "get") else None
        if not isinstance(username, str) or not username:
            return None
        digest = hashlib.sha256(username.strip().lower().encode()).hexdigest()
        return self.cache_format % {"scope": self.scope, "ident": digest}


class LoginSerializer(serializers.Serializer[Any]):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=200, trim_whitespace=False, style={"input_type": "password"})


@method_decorator(ensure_csrf_cookie, name="dispatch")
class LoginView(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes = [ScopedRateThrottle, LoginUsernameThrottle]
    throttle_scope = "login"

    @extend_schema(request=LoginSerializer, responses={200: inline_serializer(
        "LoginResult", {"username": serializers.CharField()})})
    def post(self, request: Request) -> Response:
        data = LoginSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = authenticate(request._request, **data.validated_data)
        if user is None:
            # A 401 from a view without authenticators needs the explicit status.
            raise ApplicationError("Wrong username or password.", code="authentication_failed", http_status=401)
        login(request._request, user)
        return Response({"username": user.get_username()})


class LogoutView(APIView):
    @extend_schema(request=None, responses={204: None})
    def post(self, request: Request) -> Response:
        logout(request._request)
        return Response(status=status.HTTP_204_NO_CONTENT)
