from django.apps import AppConfig


class KafkaRestConfig(AppConfig):
    name = "controlplane.kafkarest"
    label = "kafkarest"
