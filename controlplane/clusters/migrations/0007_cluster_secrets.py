"""Each cluster's internal password and token key become random secrets of their own (ClusterSecret).

Existing clusters' brokers run with the values once derived from SECRET_KEY, so those are carried over as
version 1 (computed here one last time, never again) with a rotation to fresh random ones already requested:
the next reconcile rolls every broker onto them and drops the old credential. Nothing is interrupted, and
afterwards nothing about a cluster follows from SECRET_KEY.
"""

import hashlib
import hmac
import secrets

from django.conf import settings
from django.utils import timezone

import controlplane.clusters.models
import django.db.models.deletion
from django.db import migrations, models


def _carry_over(apps, schema_editor):  # type: ignore[no-untyped-def]
    Cluster = apps.get_model("clusters", "Cluster")
    ClusterSecret = apps.get_model("clusters", "ClusterSecret")
    key = settings.SECRET_KEY.encode()
    now = timezone.now()
    for cluster in Cluster.objects.filter(secret__isnull=True).iterator():
        kid = cluster.kafka_cluster_id
        ClusterSecret.objects.create(
            cluster=cluster, version=1,
            internal_password=hmac.new(key, f"cluster-internal:{kid}".encode(), hashlib.sha256).hexdigest(),
            token_key=hmac.new(key, f"token-key:{kid}".encode(), hashlib.sha256).hexdigest(),
            next_internal_password=secrets.token_urlsafe(32), next_token_key=secrets.token_bytes(32).hex(),
            rotation_requested_at=now)


class Migration(migrations.Migration):

    dependencies = [
        ('clusters', '0006_throughput_bytes_out'),
    ]

    operations = [
        migrations.CreateModel(
            name='ClusterSecret',
            fields=[
                ('cluster', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='secret', serialize=False, to='clusters.cluster')),
                ('version', models.PositiveIntegerField(default=1)),
                ('internal_password', models.CharField(default=controlplane.clusters.models.new_internal_password, max_length=128)),
                ('token_key', models.CharField(default=controlplane.clusters.models.new_token_key, max_length=128)),
                ('next_internal_password', models.CharField(blank=True, default='', max_length=128)),
                ('next_token_key', models.CharField(blank=True, default='', max_length=128)),
                ('rotation_requested_at', models.DateTimeField(blank=True, null=True)),
                ('rotated_at', models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.AddField(
            model_name='brokernode',
            name='secrets_version',
            field=models.PositiveIntegerField(default=1),
        ),
        migrations.RunPython(_carry_over, migrations.RunPython.noop),
    ]
