"""Sluice control plane: the Django project."""
from controlplane.celery_app import app as celery_app

__all__ = ["celery_app"]
