from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "controlplane.clusters"
    label = "clusters"

    def ready(self) -> None:
        # Imported here, as Django requires: the models are loaded only once the app registry is.
        from controlplane.clusters.signals import on_kafka_access_changed  # noqa: PLC0415
        from controlplane.tenancy.signals import kafka_access_changed  # noqa: PLC0415

        kafka_access_changed.connect(on_kafka_access_changed, dispatch_uid="clusters.kafka_access_changed")
