"""Session login for the web console (API clients use keys instead)."""

from __future__ import annotations

from django.contrib.auth import authenticate, login, logout
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.core.errors import ApplicationError
from controlplane.core.serializers import StrictSerializer, bodiless
from controlplane.tenancy import login_throttle


class LoginSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=200, trim_whitespace=False, style={"input_type": "password"})


@method_decorator(ensure_csrf_cookie, name="dispatch")
class LoginView(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    # Failed attempts per client address and per (username, client address); see login_throttle.
    throttle_classes = [login_throttle.LoginAddressThrottle, login_throttle.LoginUserAddressThrottle]

    def check_throttles(self, request: Request) -> None:
        try:
            super().check_throttles(request)
        except Exception:
            login_throttle.forgive(request)  # refused by one throttle: not an attempt for the other either
            raise

    @extend_schema(request=LoginSerializer, responses={200: inline_serializer(
        "LoginResult", {"username": serializers.CharField()})})
    def post(self, request: Request) -> Response:
        wrong = False
        try:
            data = LoginSerializer(data=request.data)
            data.is_valid(raise_exception=True)
            user = authenticate(request._request, **data.validated_data)
            if user is None:
                wrong = True
                # A 401 from a view without authenticators needs the explicit status.
                raise ApplicationError("Wrong username or password.", code="authentication_failed", http_status=401)
            login(request._request, user)
            return Response({"username": user.get_username()})
        finally:
            if not wrong:
                login_throttle.forgive(request)  # only wrong passwords count


class LogoutView(APIView):
    @extend_schema(request=None, responses={204: None})
    @bodiless
    def post(self, request: Request) -> Response:
        logout(request._request)
        return Response(status=status.HTTP_204_NO_CONTENT)
