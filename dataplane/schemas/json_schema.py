"""JSON Schema: parsing against the draft's meta-schema (``jsonschema``), stored forms, and compatibility.

Drafts 4, 6, 7, 2019-09 and 2020-12, chosen by ``$schema`` (draft-07 when absent, as Confluent does).
References are ``$ref`` URLs resolved through the caller's mapping (``referencing`` registry), never fetched.

Compatibility follows Confluent's ``SchemaDiff``: compare the old schema (original) with the new (update),
and the change is compatible when every difference is a *widening* (the update accepts at least what the
original accepted). BACKWARD compares (old, new), FORWARD (new, old). Checked:

* ``type`` extended (``integer`` → ``number``, a type added) or narrowed/changed;
* ``enum``/``const`` extended or narrowed; ``not`` added or changed;
* bounds: ``maximum``/``exclusiveMaximum``/``maxLength``/``maxItems``/``maxProperties`` may only grow or go,
  their ``min`` twins only shrink or go; ``multipleOf`` only to a divisor; ``pattern``/``uniqueItems`` only go;
* objects: properties added or removed against open, closed (``additionalProperties: false``) and
  partially open (``additionalProperties`` a schema) content models; ``required`` added (compatible only
  with a ``default``) or removed; ``additionalProperties`` itself;
* arrays: ``items`` (one schema, or tuples via ``items``/``prefixItems`` with ``additionalItems``/``items``);
* ``oneOf``/``anyOf`` branches added (compatible) or removed, ``allOf`` branches removed (compatible) or
  added, ``oneOf`` → ``anyOf``; local and referenced ``$ref`` followed (recursion assumed compatible).

Treated conservatively or not at all: ``patternProperties``, ``dependencies``/``dependentRequired``/
``dependentSchemas``, ``if``/``then``/``else``, ``contains``, ``propertyNames``, ``format`` and
``unevaluated*`` are not compared (a change there is not reported); combined schemas are matched branch to
branch by "some branch accepts it", not by Confluent's bipartite matching.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import referencing
import referencing.exceptions
import referencing.jsonschema

from dataplane.schemas.base import Reference, SchemaError, SchemaType, resolve_reference

_D = jsonschema.validators
# $schema URI (without a trailing '#') → the draft's validator; http and https both accepted.
DRAFTS: dict[str, type[Any]] = {}
for _cls in (_D.Draft4Validator, _D.Draft6Validator, _D.Draft7Validator, _D.Draft201909Validator,
             _D.Draft202012Validator):
    _uri = str(_cls.META_SCHEMA["$schema"]).rstrip("#")
    for _scheme in ("http://", "https://"):
        DRAFTS[_scheme + _uri.split("://", 1)[1]] = _cls
DEFAULT_DRAFT: type[Any] = _D.Draft7Validator
_SPECS = {
    _D.Draft4Validator: referencing.jsonschema.DRAFT4,
    _D.Draft6Validator: referencing.jsonschema.DRAFT6,
    _D.Draft7Validator: referencing.jsonschema.DRAFT7,
    _D.Draft201909Validator: referencing.jsonschema.DRAFT201909,
    _D.Draft202012Validator: referencing.jsonschema.DRAFT202012,
}
_ROOT_URI = "urn:sluice:schema"
_COMBINERS = ("oneOf", "anyOf", "allOf")


@dataclass(frozen=True, slots=True, eq=False)
class JsonSchema:
    """A parsed JSON Schema: the document, its draft's validator (with references) for payloads."""

    raw: Any
    references: tuple[Reference, ...]
    validator: Any = field(repr=False)
    resolver: Any = field(repr=False)

    @property
    def schema_type(self) -> SchemaType:
        return SchemaType.JSON

    def canonical(self) -> str:
        """Compact JSON, keys in the order written (Confluent's ``canonicalString``)."""
        return json.dumps(self.raw, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        """Keys sorted and ``required`` sorted: order carries no meaning in either."""
        return json.dumps(_sorted_required(self.raw), separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonSchema) and self.canonical() == other.canonical()

    def __hash__(self) -> int:
        return hash(self.canonical())


def _sorted_required(raw: Any) -> Any:
    if isinstance(raw, list):
        return [_sorted_required(item) for item in raw]
    if isinstance(raw, dict):
        return {k: (sorted(v) if k == "required" and isinstance(v, list) and all(isinstance(x, str) for x in v)
                    else _sorted_required(v)) for k, v in raw.items()}
    return raw


def parse_json_schema(
    text: str, references: Sequence[Reference] = (), resolved: Mapping[str, str] | None = None
) -> JsonSchema:
    """Parse and check ``text`` against its draft's meta-schema; ``resolved`` maps ``$ref`` URLs to texts."""
    resolved = resolved or {}
    for ref in references:
        resolve_reference(ref.name, resolved)
    raw = _load(text, "schema")
    cls = _draft(raw)
    _check(cls, raw, "")
    spec = _SPECS[cls]
    registry: referencing.Registry[Any] = referencing.Registry()
    for name, ref_text in resolved.items():
        ref_raw = _load(ref_text, f"reference {name!r}")
        ref_cls = _draft(ref_raw, cls)
        _check(ref_cls, ref_raw, f"reference {name!r}: ")
        resource = referencing.Resource.from_contents(ref_raw, default_specification=_SPECS[ref_cls])
        registry = registry.with_resource(name, resource)
    root_uri = _ROOT_URI
    if isinstance(raw, dict):
        root_uri = urljoin(_ROOT_URI, str(raw.get("$id", raw.get("id", "")))) if cls is not _D.Draft4Validator \
            else urljoin(_ROOT_URI, str(raw.get("id", "")))
    registry = registry.with_resource(root_uri, referencing.Resource.from_contents(raw, default_specification=spec))
    registry = registry.crawl()
    resolver = registry.resolver(base_uri=root_uri)
    for base, target in _refs(raw, root_uri):
        try:
            resolver.lookup(urljoin(base, target))
        except referencing.exceptions.Unresolvable:
            raise SchemaError(f"Invalid schema: $ref {target!r} cannot be resolved (add it as a reference)") from None
    validator = cls(raw, registry=registry)
    return JsonSchema(raw, tuple(references), validator, resolver)


def _load(text: str, what: str) -> Any:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"Invalid schema: {what} is not JSON: {exc}") from None
    if not isinstance(raw, (dict, bool)):
        raise SchemaError(f"Invalid schema: {what} must be a JSON object or boolean")
    return raw


def _draft(raw: Any, default: type[Any] = DEFAULT_DRAFT) -> type[Any]:
    if not isinstance(raw, dict) or "$schema" not in raw:
        return default
    uri = str(raw["$schema"]).rstrip("#")
    if uri not in DRAFTS:
        raise SchemaError(f"Invalid schema: unsupported $schema {raw['$schema']!r} "
                          "(drafts 4, 6, 7, 2019-09 and 2020-12 are supported)")
    return DRAFTS[uri]


def _check(cls: type[Any], raw: Any, prefix: str) -> None:
    error = jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(raw))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise SchemaError(f"Invalid schema: {prefix}{error.message} at '#/{where}'")


def _refs(raw: Any, base: str) -> Iterator[tuple[str, str]]:
    if isinstance(raw, list):
        for item in raw:
            yield from _refs(item, base)
    elif isinstance(raw, dict):
        if isinstance(raw.get("$id"), str):
            base = urljoin(base, raw["$id"])
        for key, value in raw.items():
            if key == "$ref" and isinstance(value, str):
                yield base, value
            elif key not in ("enum", "const", "default", "examples"):
                yield from _refs(value, base)


# -- compatibility -------------------------------------------------------------------------------------------

def json_schema_compatibility(original: JsonSchema, update: JsonSchema) -> list[str]:
    """The incompatible differences from ``original`` to ``update``: empty when ``update`` accepts all
    ``original`` accepted (so ``update`` can read ``original``'s data)."""
    return _Diff(original.resolver, update.resolver).compare(original.raw, update.raw, "#")


_MAXIMA = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_MINIMA = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")


def _problem(kind: str, path: str, detail: str) -> str:
    return f"{kind} at '{path}': {detail}"


def _types(schema: dict[str, Any]) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else set(kind)


def _is_empty(schema: Any) -> bool:
    """Accepts anything: ``true``, ``{}`` or only annotations."""
    if schema is True:
        return True
    return isinstance(schema, dict) and not (set(schema) - {"$schema", "$id", "id", "title", "description",
                                                             "$comment", "default", "examples", "definitions",
                                                             "$defs"})


class _Diff:
    def __init__(self, original: Any, update: Any) -> None:
        self._resolvers = (original, update)
        self._seen: set[tuple[int, int]] = set()

    def _deref(self, schema: Any, side: int, seen: int = 0) -> tuple[Any, Any]:
        resolver = self._resolvers[side]
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 32:
            try:
                resolved = resolver.lookup(schema["$ref"])
            except referencing.exceptions.Unresolvable:
                break
            schema, resolver = resolved.contents, resolved.resolver
            seen += 1
        return schema, resolver

    def compare(self, original: Any, update: Any, path: str) -> list[str]:
        original, o_resolver = self._deref(original, 0)
        update, u_resolver = self._deref(update, 1)
        key = (id(original), id(update))
        if key in self._seen:
            return []
        self._seen.add(key)
        saved = self._resolvers
        self._resolvers = (o_resolver, u_resolver)
        try:
            return self._compare(original, update, path)
        finally:
            self._resolvers = saved
            self._seen.discard(key)

    def _accepts(self, original: Any, update: Any) -> bool:
        return not self.compare(original, update, "")

    def _compare(self, original: Any, update: Any, path: str) -> list[str]:
        if _is_empty(update):
            return []
        if original is False:
            return []
        if _is_empty(original):
            return [_problem("TYPE_NARROWED", path, "the new schema constrains what the old accepted as anything")]
        if update is False:
            return [_problem("TYPE_NARROWED", path, "the new schema accepts nothing")]
        o_kind = next((k for k in _COMBINERS if k in original), None)
        u_kind = next((k for k in _COMBINERS if k in update), None)
        if o_kind is None and u_kind is None:
            return self._plain(original, update, path)
        o_plain = {k: v for k, v in original.items() if k not in _COMBINERS}
        u_plain = {k: v for k, v in update.items() if k not in _COMBINERS}
        if u_kind is None:  # only the old schema combines: its branches (with its other keywords) against update
            assert o_kind is not None
            branches = [_merge(o_plain, b) for b in original[o_kind]]
            if o_kind == "allOf":
                if self._accepts(o_plain, update) or any(self._accepts(b, update) for b in branches):
                    return []
                return [_problem("PRODUCT_TYPE_EXTENDED", path, "the new schema constrains more than the allOf")]
            if all(self._accepts(b, update) for b in branches):
                return []
            return [_problem("SUM_TYPE_NARROWED", path, f"an old {o_kind} branch is no longer accepted")]
        problems = [] if _is_empty(u_plain) else self._plain(o_plain if o_kind else original, u_plain, path)
        return problems + self._combined(original, update, o_kind, u_kind, path)

    def _combined(self, original: dict[str, Any], update: dict[str, Any], o_kind: str | None, u_kind: str,
                  path: str) -> list[str]:
        u_branches: list[Any] = update[u_kind]
        if o_kind is None:
            if u_kind == "allOf":
                if all(self._accepts(original, b) for b in u_branches):
                    return []
                return [_problem("PRODUCT_TYPE_EXTENDED", f"{path}/allOf", "an allOf branch narrows the old schema")]
            if any(self._accepts(original, b) for b in u_branches):
                return []
            return [_problem("TYPE_CHANGED", f"{path}/{u_kind}", f"no {u_kind} branch accepts the old schema")]
        o_plain = {k: v for k, v in original.items() if k not in _COMBINERS}
        o_branches = [_merge(o_plain, b) for b in original[o_kind]]
        if o_kind != u_kind and not (o_kind == "oneOf" and u_kind == "anyOf"):
            return [_problem("COMBINED_TYPE_CHANGED", path, f"{o_kind} changed to {u_kind}")]
        if u_kind == "allOf":
            lost = [i for i, b in enumerate(u_branches) if not any(self._accepts(o, b) for o in o_branches)]
            return [_problem("PRODUCT_TYPE_EXTENDED", f"{path}/allOf/{i}", "allOf branch added or narrowed")
                    for i in lost]
        lost = [i for i, o in enumerate(o_branches) if not any(self._accepts(o, b) for b in u_branches)]
        return [_problem("SUM_TYPE_NARROWED", f"{path}/{o_kind}/{i}", f"old {o_kind} branch {i} is not accepted")
                for i in lost]

    def _plain(self, original: dict[str, Any], update: dict[str, Any], path: str) -> list[str]:
        problems: list[str] = []
        problems += self._type(original, update, path)
        problems += self._enum(original, update, path)
        problems += self._bounds(original, update, path)
        if "not" in update:
            if "not" not in original:
                problems.append(_problem("NOT_TYPE_EXTENDED", f"{path}/not", "a 'not' was added"))
            elif not self._accepts(update["not"], original["not"]):
                problems.append(_problem("NOT_TYPE_EXTENDED", f"{path}/not", "'not' excludes more"))
        if "pattern" in update and update.get("pattern") != original.get("pattern"):
            kind = "PATTERN_ADDED" if "pattern" not in original else "PATTERN_CHANGED"
            problems.append(_problem(kind, f"{path}/pattern", f"pattern {update['pattern']!r}"))
        if update.get("uniqueItems") is True and original.get("uniqueItems") is not True:
            problems.append(_problem("UNIQUE_ITEMS_ADDED", f"{path}/uniqueItems", "items must now be unique"))
        problems += self._object(original, update, path)
        problems += self._array(original, update, path)
        return problems

    @staticmethod
    def _type(original: dict[str, Any], update: dict[str, Any], path: str) -> list[str]:
        o_types, u_types = _types(original), _types(update)
        if u_types is None or o_types == u_types:
            return []
        if o_types is None:
            return [_problem("TYPE_NARROWED", f"{path}/type", f"type restricted to {sorted(u_types)}")]
        widened = u_types | ({"integer"} if "number" in u_types else set())
        if o_types <= widened:
            return []
        overlap = bool(o_types & widened) or ("number" in o_types and "integer" in u_types)
        kind = "TYPE_NARROWED" if overlap else "TYPE_CHANGED"
        return [_problem(kind, f"{path}/type", f"{sorted(o_types)} to {sorted(u_types)}")]

    @staticmethod
    def _enum(original: dict[str, Any], update: dict[str, Any], path: str) -> list[str]:
        def values(schema: dict[str, Any]) -> list[Any] | None:
            if "const" in schema:
                return [schema["const"]]
            return list(schema["enum"]) if "enum" in schema else None

        o_values, u_values = values(original), values(update)
        if u_values is None:
            return []
        if o_values is None:
            return [_problem("ENUM_ARRAY_NARROWED", f"{path}/enum", "an enum was added")]
        missing = [v for v in o_values if v not in u_values]
        if not missing:
            return []
        kind = "ENUM_ARRAY_NARROWED" if len(missing) < len(o_values) else "ENUM_ARRAY_CHANGED"
        return [_problem(kind, f"{path}/enum", f"values removed: {json.dumps(missing)}")]

    @staticmethod
    def _bounds(original: dict[str, Any], update: dict[str, Any], path: str) -> list[str]:
        problems: list[str] = []
        for keys, tighter in ((_MAXIMA, "DECREASED"), (_MINIMA, "INCREASED")):
            for key in keys:
                o, u = original.get(key), update.get(key)
                name = _constant(key)
                if isinstance(u, bool) or isinstance(o, bool):  # draft 4's boolean exclusiveMaximum/Minimum
                    if u is True and o is not True:
                        problems.append(_problem(f"{name}_ADDED", f"{path}/{key}", "the bound became exclusive"))
                    continue
                if u is None:
                    continue
                if o is None:
                    problems.append(_problem(f"{name}_ADDED", f"{path}/{key}", f"{key} {u} added"))
                elif (u < o) if tighter == "DECREASED" else (u > o):
                    problems.append(_problem(f"{name}_{tighter}", f"{path}/{key}", f"{key} {o} to {u}"))
        o_mult, u_mult = original.get("multipleOf"), update.get("multipleOf")
        if u_mult is not None:
            if o_mult is None:
                problems.append(_problem("MULTIPLE_OF_ADDED", f"{path}/multipleOf", f"multipleOf {u_mult} added"))
            elif (o_mult / u_mult) != int(o_mult / u_mult):
                problems.append(_problem("MULTIPLE_OF_CHANGED", f"{path}/multipleOf", f"{o_mult} to {u_mult}"))
        return problems

    def _object(self, original: dict[str, Any], update: dict[str, Any], path: str) -> list[str]:
        problems: list[str] = []
        o_props: dict[str, Any] = original.get("properties", {})
        u_props: dict[str, Any] = update.get("properties", {})
        o_extra = original.get("additionalProperties", True)
        u_extra = update.get("additionalProperties", True)
        for name in u_props:
            where = f"{path}/properties/{name}"
            if name in o_props:
                problems += self.compare(o_props[name], u_props[name], where)
            elif o_extra is False:
                continue  # PROPERTY_ADDED_TO_CLOSED_CONTENT_MODEL: the old data cannot have it
            elif not _is_empty(o_extra):
                if not self._accepts(o_extra, u_props[name]):
                    problems.append(_problem("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                                             f"'{name}' is narrower than the old additionalProperties"))
            elif not _is_empty(u_props[name]):
                problems.append(_problem("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where,
                                         f"old data may hold '{name}' with any value"))
        for name in o_props:
            if name in u_props:
                continue
            where = f"{path}/properties/{name}"
            if u_extra is False:
                problems.append(_problem("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where,
                                         f"old data may hold '{name}', which the new schema forbids"))
            elif not _is_empty(u_extra) and not self._accepts(o_props[name], u_extra):
                problems.append(_problem("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where,
                                         f"'{name}' is not accepted by the new additionalProperties"))
        if u_extra is False and o_extra is not False:
            problems.append(_problem("ADDITIONAL_PROPERTIES_REMOVED", f"{path}/additionalProperties",
                                     "the content model was closed"))
        elif u_extra is not False and o_extra is not False and not _is_empty(u_extra):
            problems += [p.replace("TYPE_NARROWED", "ADDITIONAL_PROPERTIES_NARROWED", 1)
                         for p in self.compare(o_extra, u_extra, f"{path}/additionalProperties")]
        o_required = set(original.get("required", ()))
        for name in update.get("required", ()):
            if name in o_required:
                continue
            prop = u_props.get(name)
            if isinstance(prop, dict) and "default" in prop:
                continue  # REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED
            problems.append(_problem("REQUIRED_ATTRIBUTE_ADDED", f"{path}/required/{name}",
                                     f"'{name}' is now required and old data may lack it"))
        return problems

    def _array(self, original: dict[str, Any], update: dict[str, Any], path: str) -> list[str]:
        o_prefix, o_rest, o_key = _tuple(original)
        u_prefix, u_rest, u_key = _tuple(update)
        problems: list[str] = []
        for index in range(max(len(o_prefix), len(u_prefix))):
            where = f"{path}/{u_key if index < len(u_prefix) else o_key}/{index}"
            o_item = o_prefix[index] if index < len(o_prefix) else o_rest
            u_item = u_prefix[index] if index < len(u_prefix) else u_rest
            if o_item is False:
                continue
            problems += self.compare(o_item, u_item, where)
        if u_rest is not True:
            problems += self.compare(o_rest, u_rest, f"{path}/items")
        return problems


def _merge(plain: dict[str, Any], branch: Any) -> Any:
    """A combined branch with the keywords beside the combiner, which constrain every branch too."""
    if isinstance(branch, dict) and "$ref" not in branch and plain:
        return {**plain, **branch}
    return branch


def _tuple(schema: dict[str, Any]) -> tuple[list[Any], Any, str]:
    """(positional item schemas, the schema for the rest, the positional keyword) of an array schema."""
    if "prefixItems" in schema:
        return list(schema["prefixItems"]), schema.get("items", True), "prefixItems"
    items = schema.get("items", True)
    if isinstance(items, list):
        return items, schema.get("additionalItems", True), "items"
    return [], items, "items"


def _constant(key: str) -> str:
    out = "".join(f"_{c}" if c.isupper() else c.upper() for c in key)
    return out.lstrip("_")
