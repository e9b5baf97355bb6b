"""Every way a cluster's registry changes: register, delete, config and mode.

Each service is one transaction that first locks the cluster's Registry row (``select_for_update``), so two web
processes registering at once are serialised: the same schema gets one id and a subject's versions are never
skipped or doubled. Each writes one audit row.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from controlplane.audit.services import audit_record
from controlplane.clusters.models import Cluster
from controlplane.core.actors import Actor
from controlplane.registry import cache, errors, selectors
from controlplane.registry.errors import RegistryError
from controlplane.registry.models import DEFAULT_COMPATIBILITY, Mode, Registry, Schema, SubjectConfig, SubjectVersion
from controlplane.registry.selectors import LATEST, candidate, compatibility_level, parsed_of, subject_versions
from dataplane.schemas import CompatibilityLevel, check


def _locked(cluster: Cluster) -> Registry:
    """The cluster's registry row, made on first use, locked until the transaction ends. Whatever the write,
    once it commits the registry's cached answers are stale (``cache.bump_generation``)."""
    Registry.objects.get_or_create(cluster=cluster)
    registry = Registry.objects.select_for_update().get(cluster=cluster)
    pk = registry.pk
    transaction.on_commit(lambda: cache.bump_generation(pk))
    return registry


def _audit(cluster: Cluster, actor: Actor, action: str, target: str, data: dict[str, Any]) -> None:
    audit_record(tenant=cluster.tenant, actor=actor, action=action, target_type="schema_registry",
                 target_id=f"{cluster.kafka_cluster_id}/{target}" if target else cluster.kafka_cluster_id, data=data)


def _writable(registry: Registry, subject: str) -> str:
    mode = selectors.effective_mode(registry, subject)
    if mode == Mode.READONLY:
        raise RegistryError(errors.OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode")
    return mode


def schema_register(*, cluster: Cluster, actor: Actor, subject: str, body: Any, normalize: bool = False) -> int:
    """Register the body's schema under ``subject``; its id. A schema the subject already has live keeps its
    version and id; one registered under another subject gets the same id; ``id`` is honoured in IMPORT mode."""
    with transaction.atomic():
        registry = _locked(cluster)
        mode = _writable(registry, subject)
        requested = body.get("id") if isinstance(body, dict) else None
        if requested is not None and mode != Mode.IMPORT:
            raise RegistryError(errors.OPERATION_NOT_PERMITTED, f"Subject {subject} is not in import mode")
        if requested is not None and (not isinstance(requested, int) or requested < 1):
            raise RegistryError(errors.INVALID_SCHEMA, f"Invalid schema id {requested!r}")
        new = candidate(registry, body, normalize=normalize)
        rows = list(subject_versions(registry, subject, deleted=True))
        live = [row for row in rows if not row.deleted]
        same = selectors.same_version(live, new, normalize=normalize)
        if same is not None and requested in (None, same.schema.schema_id):
            return same.schema.schema_id
        if mode != Mode.IMPORT:
            level = compatibility_level(registry, subject)
            problems = check(new.parsed, [parsed_of(row.schema) for row in live], level)
            if problems:
                raise RegistryError(errors.INCOMPATIBLE_SCHEMA,
                                    f"Schema being registered is incompatible with an earlier schema for subject "
                                    f"\"{subject}\", details: [{', '.join(problems)}]")
        schema = Schema.objects.filter(registry=registry, fingerprint=new.fingerprint).first()
        if requested is not None:
            holder = Schema.objects.filter(registry=registry, schema_id=requested).first()
            if (schema is not None and schema.schema_id != requested) or \
                    (holder is not None and holder.fingerprint != new.fingerprint):
                raise RegistryError(errors.OPERATION_NOT_PERMITTED,
                                    f"Overwrite new schema with id {requested} is not permitted.")
        if schema is None:
            schema_id = requested if requested is not None else registry.last_schema_id + 1
            registry.last_schema_id = max(registry.last_schema_id, schema_id)
            registry.save(update_fields=["last_schema_id"])
            schema = Schema.objects.create(registry=registry, schema_id=schema_id, schema_type=new.parsed.schema_type,
                                           text=new.text, references=new.references, fingerprint=new.fingerprint)
        version = max((row.version for row in rows), default=0) + 1
        SubjectVersion.objects.create(registry=registry, subject=subject, version=version, schema=schema)
        _audit(cluster, actor, "schema.register", subject,
               {"subject": subject, "version": version, "id": schema.schema_id, "schema_type": schema.schema_type})
        return schema.schema_id


def _referenced(registry: Registry, subject: str, version: int) -> None:
    if selectors.referenced_by(registry, subject, version):
        raise RegistryError(errors.REFERENCE_EXISTS,
                            f"One or more references exist to the schema {{subject={subject},version={version}}}.")


def _drop_orphans(registry: Registry) -> None:
    """Forget schemas no version uses any more (hard delete): their ids then answer 40403. Ids are not reused
    (except by IMPORT mode). This process's cached schemas of the registry go once the transaction commits."""
    Schema.objects.filter(registry=registry, versions__isnull=True).delete()
    pk = registry.pk
    cache.forget_registry(pk)  # now (this transaction's own reads) and at commit (reads made meanwhile)
    transaction.on_commit(lambda: cache.forget_registry(pk))


def subject_delete(*, cluster: Cluster, actor: Actor, subject: str, permanent: bool) -> list[int]:
    """Soft-delete every live version of ``subject``, or (``permanent``) forget a soft-deleted subject."""
    with transaction.atomic():
        registry = _locked(cluster)
        _writable(registry, subject)
        rows = list(subject_versions(registry, subject, deleted=True))
        if not rows:
            raise errors.subject_not_found(subject)
        live = [row for row in rows if not row.deleted]
        if permanent:
            if live:
                raise RegistryError(errors.SUBJECT_NOT_SOFT_DELETED, f"Subject '{subject}' was not deleted first "
                                                                     "before being permanently deleted")
            SubjectVersion.objects.filter(pk__in=[row.pk for row in rows]).delete()
            SubjectConfig.objects.filter(registry=registry, subject=subject).delete()
            _drop_orphans(registry)
            deleted = [row.version for row in rows]
        else:
            if not live:
                raise RegistryError(errors.SUBJECT_SOFT_DELETED, f"Subject '{subject}' was soft deleted.Set "
                                                                 "permanent=true to delete permanently")
            for row in live:
                _referenced(registry, subject, row.version)
            SubjectVersion.objects.filter(pk__in=[row.pk for row in live]).update(deleted=True)
            deleted = [row.version for row in live]
        _audit(cluster, actor, "subject.delete", subject, {"subject": subject, "versions": deleted,
                                                           "permanent": permanent})
        return deleted


def subject_version_delete(*, cluster: Cluster, actor: Actor, subject: str, version: int, permanent: bool) -> int:
    """Soft-delete one version, or (``permanent``) forget a soft-deleted one; Confluent's 4040x otherwise."""
    with transaction.atomic():
        registry = _locked(cluster)
        _writable(registry, subject)
        rows = list(subject_versions(registry, subject, deleted=True))
        if not rows:
            raise errors.subject_not_found(subject)
        if version == LATEST:
            live = [row for row in rows if not row.deleted]
            row = live[-1] if live else (rows[-1] if permanent else None)
        else:
            row = next((r for r in rows if r.version == version), None)
        if row is None:
            raise errors.version_not_found(version)
        if permanent:
            if not row.deleted:
                raise RegistryError(errors.VERSION_NOT_SOFT_DELETED, f"Subject '{subject}' Version {row.version} was "
                                                                     "not deleted first before being permanently "
                                                                     "deleted")
            row.delete()
            _drop_orphans(registry)
        else:
            if row.deleted:
                raise RegistryError(errors.VERSION_SOFT_DELETED, f"Subject '{subject}' Version {row.version} was "
                                                                 "soft deleted.Set permanent=true to delete "
                                                                 "permanently")
            _referenced(registry, subject, row.version)
            row.deleted = True
            row.save(update_fields=["deleted"])
        _audit(cluster, actor, "subject.version.delete", subject,
               {"subject": subject, "version": row.version, "permanent": permanent})
        return row.version


def _subject_config(registry: Registry, subject: str) -> SubjectConfig:
    config, _ = SubjectConfig.objects.get_or_create(registry=registry, subject=subject)
    return config


def registry_config_set(*, cluster: Cluster, actor: Actor, subject: str | None, level: CompatibilityLevel) -> None:
    """Set the registry's (``subject`` None) or a subject's compatibility level."""
    with transaction.atomic():
        registry = _locked(cluster)
        if subject is None:
            registry.compatibility = level.value
            registry.save(update_fields=["compatibility"])
        else:
            config = _subject_config(registry, subject)
            config.compatibility = level.value
            config.save(update_fields=["compatibility"])
        _audit(cluster, actor, "registry.config", subject or "", {"subject": subject, "compatibility": level.value})


def registry_config_delete(*, cluster: Cluster, actor: Actor, subject: str | None) -> str:
    """Back to the default level (registry) or to the registry's level (subject); the level it had."""
    with transaction.atomic():
        registry = _locked(cluster)
        if subject is None:
            previous = registry.compatibility
            registry.compatibility = DEFAULT_COMPATIBILITY
            registry.save(update_fields=["compatibility"])
        else:
            config = selectors.subject_config(registry, subject)
            if config is None or not config.compatibility:
                raise errors.subject_not_found(subject)
            previous = config.compatibility
            config.compatibility = None
            config.save(update_fields=["compatibility"])
        _audit(cluster, actor, "registry.config", subject or "", {"subject": subject, "compatibility": None})
        return previous


def registry_mode_set(*, cluster: Cluster, actor: Actor, subject: str | None, mode: Mode, force: bool) -> None:
    """Set the registry's or a subject's mode; IMPORT needs no versions there unless ``force`` (ids would clash)."""
    with transaction.atomic():
        registry = _locked(cluster)
        if mode == Mode.IMPORT and not force:
            rows = SubjectVersion.objects.filter(registry=registry)
            if subject is not None:
                rows = rows.filter(subject=subject)
            if rows.exists():
                raise RegistryError(errors.OPERATION_NOT_PERMITTED, "Cannot import since found existing subjects")
        if subject is None:
            registry.mode = mode.value
            registry.save(update_fields=["mode"])
        else:
            config = _subject_config(registry, subject)
            config.mode = mode.value
            config.save(update_fields=["mode"])
        _audit(cluster, actor, "registry.mode", subject or "", {"subject": subject, "mode": mode.value})


def registry_mode_delete(*, cluster: Cluster, actor: Actor, subject: str) -> str:
    """A subject back to the registry's mode; the mode it had."""
    with transaction.atomic():
        registry = _locked(cluster)
        config = selectors.subject_config(registry, subject)
        if config is None or not config.mode:
            raise errors.subject_not_found(subject)
        previous = config.mode
        config.mode = None
        config.save(update_fields=["mode"])
        _audit(cluster, actor, "registry.mode", subject, {"subject": subject, "mode": None})
        return previous

