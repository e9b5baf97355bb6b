# Managed clusters: agents, broker nodes, the Kafka cluster id, drift policy and the deletion finalizer.

import django.db.models.deletion
from django.db import migrations, models

import controlplane.clusters.models


def fill_kafka_cluster_ids(apps, schema_editor):
    Cluster = apps.get_model("clusters", "Cluster")
    for cluster in Cluster.objects.filter(kafka_cluster_id__isnull=True):
        cluster.kafka_cluster_id = controlplane.clusters.models.new_kafka_cluster_id()
        cluster.save(update_fields=["kafka_cluster_id"])


class Migration(migrations.Migration):

    dependencies = [
        ('clusters', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='cluster',
            name='kafka_cluster_id',
            field=models.CharField(max_length=64, null=True, editable=False),
        ),
        migrations.RunPython(fill_kafka_cluster_ids, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='cluster',
            name='kafka_cluster_id',
            field=models.CharField(default=controlplane.clusters.models.new_kafka_cluster_id, editable=False, max_length=64, unique=True),
        ),
        migrations.AddField(
            model_name='cluster',
            name='drift_policy',
            field=models.CharField(choices=[('correct', 'correct'), ('report', 'report')], default='correct', max_length=8),
        ),
        migrations.AddField(
            model_name='cluster',
            name='deletion_requested_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name='Agent',
            fields=[
                ('host', models.CharField(max_length=64, primary_key=True, serialize=False)),
                ('rack', models.CharField(blank=True, default='', max_length=64)),
                ('advertised_host', models.CharField(max_length=255)),
                ('port_min', models.PositiveIntegerField()),
                ('port_max', models.PositiveIntegerField()),
                ('last_seen', models.DateTimeField()),
                ('started_at', models.DateTimeField()),
            ],
            options={'ordering': ['host']},
        ),
        migrations.CreateModel(
            name='BrokerNode',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('node_id', models.PositiveIntegerField()),
                ('port', models.PositiveIntegerField()),
                ('rack', models.CharField(blank=True, default='', max_length=64)),
                ('removal_requested_at', models.DateTimeField(blank=True, null=True)),
                ('process', models.JSONField(default=dict)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='nodes', to='clusters.agent')),
                ('cluster', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='nodes', to='clusters.cluster')),
            ],
            options={
                'ordering': ['cluster', 'node_id'],
                'constraints': [
                    models.UniqueConstraint(fields=('cluster', 'node_id'), name='uniq_cluster_node'),
                    models.UniqueConstraint(fields=('agent', 'port'), name='uniq_agent_port'),
                ],
            },
        ),
    ]
