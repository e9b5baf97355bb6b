"""Kafka's rules for names of topics (and, by the same rule, of groups ids we expose)."""

from __future__ import annotations

import re

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+\Z")


class InvalidTopicName(ValueError):
    """A name Kafka would refuse (INVALID_TOPIC_EXCEPTION)."""


def validate_topic_name(name: str) -> None:
    """Raise InvalidTopicName with a readable reason, as Kafka's ``Topic.validate`` does."""
    if not name:
        raise InvalidTopicName("Topic name must not be empty.")
    if name in {".", ".."}:
        raise InvalidTopicName("Topic name cannot be '.' or '..'.")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicName(
            f"Topic name is {len(name)} characters long; the limit is {MAX_TOPIC_NAME_LENGTH}.")
    if not _LEGAL.match(name):
        raise InvalidTopicName(
            f"Topic name '{name}' is illegal: it may contain only ASCII letters, digits, '.', '_' and '-'.")


def collision_key(name: str) -> str:
    """Names equal under this key collide in metric names ('.' and '_' are the same)."""
    return name.replace(".", "_")
