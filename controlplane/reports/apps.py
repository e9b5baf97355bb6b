from django.apps import AppConfig


class ReportsConfig(AppConfig):
    name = "controlplane.reports"
    label = "reports"

    def ready(self) -> None:
        from controlplane.reports import worker  # noqa: F401, PLC0415  (worker signals: the Spark session's lifetime)
