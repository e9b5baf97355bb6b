from django.apps import AppConfig


class StreamsConfig(AppConfig):
    name = "controlplane.resources"
    label = "streams"
