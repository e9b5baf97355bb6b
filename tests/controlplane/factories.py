"""factory_boy factories for control-plane rows (through services where rules apply)."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from controlplane.clusters.models import Cluster, Plan
from controlplane.core.status import pending_status
from controlplane.resources.models import AclBinding, Topic
from controlplane.tenancy.models import Membership, Role, ServiceAccount, Tenant


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("correct horse battery staple")


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant

    slug = factory.Sequence(lambda n: f"tenant-{n}")
    name = factory.LazyAttribute(lambda t: t.slug.title())


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    tenant = factory.SubFactory(TenantFactory)
    user = factory.SubFactory(UserFactory)
    role = Role.MEMBER


class ServiceAccountFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ServiceAccount

    tenant = factory.SubFactory(TenantFactory)
    name = factory.Sequence(lambda n: f"app-{n}")
    role = Role.MEMBER


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Cluster

    tenant = factory.SubFactory(TenantFactory)
    name = factory.Sequence(lambda n: f"cluster-{n}")
    plan = Plan.STANDARD
    spec = factory.LazyFunction(lambda: {"broker_count": 3, "max_partitions": 1000})
    status = factory.LazyFunction(lambda: pending_status("cluster"))


class TopicFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Topic

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"topic-{n}")
    collision_key = factory.LazyAttribute(lambda t: t.name.replace(".", "_"))
    partitions = 3
    replication_factor = 3
    status = factory.LazyFunction(lambda: pending_status("topic"))


class AclFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AclBinding

    cluster = factory.SubFactory(ClusterFactory)
    principal = "User:*"
    resource_type = "TOPIC"
    pattern_type = "LITERAL"
    resource_name = factory.Sequence(lambda n: f"topic-{n}")
    operation = "READ"
    permission = "ALLOW"
    host = "*"
