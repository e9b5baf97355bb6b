from django.apps import AppConfig


class AgentConfig(AppConfig):
    """The dataplane-host agent: its Celery tasks are discovered from here."""

    name = "controlplane.agent"
    label = "agent"
