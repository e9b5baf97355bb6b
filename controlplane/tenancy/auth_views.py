"""Session login for the web console (API clients use keys instead)."""

from __future__ import annotations

from typing import cast

from django.contrib.auth import authenticate, login, logout, update_session_auth_hash
from django.contrib.auth.models import User
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.core.errors import ApplicationError, ValidationFailed
from controlplane.core.serializers import StrictSerializer, bodiless
from controlplane.tenancy import login_throttle
from controlplane.tenancy.serializers import InvitationJoinSerializer, TenantSerializer
from controlplane.tenancy.services import invitation_join, user_password_change


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


class PasswordChangeSerializer(StrictSerializer):
    current_password = serializers.CharField(max_length=200, trim_whitespace=False,
                                             style={"input_type": "password"})
    new_password = serializers.CharField(max_length=200, trim_whitespace=False, style={"input_type": "password"})


class PasswordChangeView(APIView):
    """The signed-in user's own password. Session only: an API key (perhaps a service account's) has no
    password to change, and a leaked key must not be a way to take over the account's console sign-in."""

    authentication_classes = [SessionAuthentication]
    # With a stolen session, the current password is something to guess: wrong ones count as failed logins.
    throttle_classes = [login_throttle.LoginAddressThrottle]

    @extend_schema(request=PasswordChangeSerializer, responses={204: None})
    def post(self, request: Request) -> Response:
        wrong = False
        try:
            data = PasswordChangeSerializer(data=request.data)
            data.is_valid(raise_exception=True)
            user = cast(User, request.user)  # session-authenticated: a real user
            try:
                user_password_change(user=user, **data.validated_data)
            except ValidationFailed as exc:
                wrong = "current_password" in exc.extra["fields"]
                raise
            user.refresh_from_db(fields=["password"])
            update_session_auth_hash(request._request, user)  # this session stays; the others end
            return Response(status=status.HTTP_204_NO_CONTENT)
        finally:
            if not wrong:
                login_throttle.forgive(request)  # only wrong current passwords count


@method_decorator(ensure_csrf_cookie, name="dispatch")
class JoinView(APIView):
    """An invitation's one-time link redeemed by someone without an account: a username and password make the
    account (with the invited address), the invitation is accepted, and the new user is signed in."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes = [login_throttle.LoginAddressThrottle]  # unknown links count as failed logins

    @extend_schema(request=InvitationJoinSerializer, responses={201: TenantSerializer})
    def post(self, request: Request) -> Response:
        unknown = False
        try:
            data = InvitationJoinSerializer(data=request.data)
            data.is_valid(raise_exception=True)
            try:
                membership = invitation_join(**data.validated_data)
            except ApplicationError as exc:
                unknown = exc.code == "not_found"
                raise
            login(request._request, membership.user, backend="django.contrib.auth.backends.ModelBackend")
            tenant = membership.tenant
            return Response(TenantSerializer(tenant, context={"roles": {tenant.pk: membership.role}}).data,
                            status=status.HTTP_201_CREATED)
        finally:
            if not unknown:
                login_throttle.forgive(request)
