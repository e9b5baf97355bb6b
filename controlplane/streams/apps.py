from django.apps import AppConfig


class StreamsConfig(AppConfig):
    name = "controlplane.streams"
    label = "streams"
