from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "controlplane.tenancy"
    label = "tenancy"

    def ready(self) -> None:
        from controlplane.tenancy import schema  # noqa: F401, PLC0415  (registers the OpenAPI auth extension)
