"""List pagination: limit/offset with a hard cap, so a list is never unbounded."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500
