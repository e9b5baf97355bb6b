# An API key may be scoped to one cluster (REST Proxy v2 root paths, Confluent Cloud's resource-scoped keys).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('clusters', '0004_throughput'),
        ('tenancy', '0002_slug_validator_anchor'),
    ]

    operations = [
        migrations.AddField(
            model_name='apikey',
            name='cluster',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE,
                                    related_name='api_keys', to='clusters.cluster'),
        ),
    ]
