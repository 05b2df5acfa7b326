"""Generate the CustomResourceDefinitions in crds/ from the pydantic models.

The models are the single source of truth; pydantic's JSON schema is rewritten into a Kubernetes
*structural* schema (no $ref, no anyOf-for-Optional, a type on every node, int-or-string for
quantities). Anything the rewrite does not understand is an error rather than a guess, and
`structural_problems` re-checks the result the way the API server would.

    python -m fleet.api.crdgen --write crds/    # regenerate
    python -m fleet.api.crdgen --check crds/    # exit 1 if crds/ differs from the models
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from fleet.api._meta import KubeResource
from fleet.api._registry import RESOURCES
from fleet.api._types import INT32_MAX, INT64_MAX

__all__ = [
    "HEADER",
    "RECURSION_DEPTH",
    "CrdGenError",
    "crd_filename",
    "crd_for",
    "main",
    "openapi_schema",
    "render_crds",
    "structural_problems",
]

HEADER: Final = (
    "# Generated from the fleet.api models by `python -m fleet.api.crdgen --write crds/`.\n"
    "# Do not edit: change the model and regenerate (tests fail when this file drifts).\n"
)

_ALLOWED_KEYS: Final = frozenset(
    {
        "type",
        "description",
        "properties",
        "required",
        "items",
        "additionalProperties",
        "enum",
        "default",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "format",
        "anyOf",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
        "x-kubernetes-embedded-resource",
    }
)
_TYPES: Final = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_FORMAT_BOUNDS: Final = {"int32": (-(2**31), INT32_MAX), "int64": (-(2**63), INT64_MAX)}
_INT_OR_STRING_ANYOF: Final = [{"type": "integer"}, {"type": "string"}]
_OBJECT_META_FIELDS: Final = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


class CrdGenError(ValueError):
    """A model field has no structural-schema equivalent."""


def _description(text: str) -> str:
    # Docstrings wrap at the source's line length; a CRD description is one paragraph per
    # blank-line-separated block.
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(p.split()) for p in paragraphs)


#: How many times a recursive model (an ElasticQuotaTree node's children) is unrolled. A
#: structural schema cannot refer to itself, so deeper levels are kept as they are
#: (x-kubernetes-preserve-unknown-fields) and checked by fleet itself.
RECURSION_DEPTH: Final = 4


def _resolve(
    node: Mapping[str, Any], defs: Mapping[str, Any], path: str, stack: tuple[str, ...]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Inline $ref and drop the null branch of Optional, keeping the field-level keys. Returns
    the node and the models being expanded down to it (to bound recursion)."""
    out = dict(node)
    while True:
        if "$ref" in out:
            name = str(out.pop("$ref")).rsplit("/", 1)[-1]
            if name not in defs:
                raise CrdGenError(f"{path}: unresolvable $ref {name}")
            if stack.count(name) >= RECURSION_DEPTH:
                text = out.get("description") or defs[name].get("description") or name
                return {
                    "description": f"{_description(str(text))} (Nested deeper than "
                    f"{RECURSION_DEPTH} levels: stored as written, checked by fleet.)",
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                }, stack
            stack = (*stack, name)
            out = {**defs[name], **out}
            continue
        if "anyOf" in out and not out.get("x-kubernetes-int-or-string"):
            options = [o for o in out.pop("anyOf") if o != {"type": "null"}]
            if len(options) != 1:
                raise CrdGenError(f"{path}: a union of several types is not a structural schema")
            out = {**options[0], **out}
            continue
        return out, stack


def _convert(
    node: Mapping[str, Any], defs: Mapping[str, Any], path: str, stack: tuple[str, ...] = ()
) -> dict[str, Any]:
    node, stack = _resolve(node, defs, path, stack)
    out: dict[str, Any] = {}
    for key in ("title", "examples"):
        node.pop(key, None)
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if node.get("additionalProperties") is False:
        del node["additionalProperties"]
    if "default" in node and node["default"] is None:
        del node["default"]
    for bound, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        # JSON Schema 2020 uses a number; Kubernetes' OpenAPI v3 a boolean next to min/max.
        if bound in node and not isinstance(node[bound], bool):
            node[flag] = node.pop(bound)
            node[bound] = True
    fmt = node.get("format")
    if fmt in _FORMAT_BOUNDS:
        lo, hi = _FORMAT_BOUNDS[fmt]
        if node.get("minimum") == lo:
            del node["minimum"]
        if node.get("maximum") == hi:
            del node["maximum"]

    unknown = set(node) - _ALLOWED_KEYS
    if unknown:
        raise CrdGenError(f"{path}: keys with no structural equivalent: {sorted(unknown)}")
    if node.get("uniqueItems"):
        raise CrdGenError(f"{path}: uniqueItems is forbidden; use a list")

    for key, value in node.items():
        if key == "description":
            out[key] = _description(str(value))
        elif key == "properties":
            out[key] = {
                name: _convert(sub, defs, f"{path}.{name}", stack) for name, sub in value.items()
            }
        elif key == "items":
            out[key] = _convert(value, defs, f"{path}[]", stack)
        elif key == "additionalProperties":
            if value is True:
                raise CrdGenError(f"{path}: untyped map; mark free-form content explicitly")
            out[key] = _convert(value, defs, f"{path}{{}}", stack)
        else:
            out[key] = value

    if not (
        "type" in out
        or out.get("x-kubernetes-int-or-string")
        or out.get("x-kubernetes-preserve-unknown-fields")
    ):
        raise CrdGenError(f"{path}: no type (use FreeForm for genuinely free-form content)")
    return _ordered(out)


_KEY_ORDER: Final = (
    "description",
    "type",
    "format",
    "enum",
    "default",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "anyOf",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "items",
    "additionalProperties",
    "properties",
    "required",
)


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    rank = {k: i for i, k in enumerate(_KEY_ORDER)}
    return dict(sorted(node.items(), key=lambda kv: rank.get(kv[0], len(rank))))


def openapi_schema(model: type[KubeResource]) -> dict[str, Any]:
    """The structural openAPIV3Schema for a resource model."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    props = dict(raw.get("properties") or {})
    info = model.crd
    body: dict[str, Any] = {}
    order = ["apiVersion", "kind", "metadata"]
    for name, sub in sorted(props.items(), key=lambda kv: [*order, kv[0]].index(kv[0])):
        if name == "apiVersion":
            body[name] = {
                "description": "Versioned schema of this representation of an object.",
                "type": "string",
            }
        elif name == "kind":
            body[name] = {"description": "Kind of this object.", "type": "string"}
        elif name == "metadata":
            # The API server owns ObjectMeta's schema; a CRD may only say it is an object.
            body[name] = {"type": "object"}
        else:
            body[name] = _convert(sub, defs, name)
    root: dict[str, Any] = {
        "description": _description(model.__doc__ or info.kind),
        "type": "object",
        "properties": body,
    }
    if info.spec_required:
        root["required"] = ["spec"]
    return root


#: The API server refuses a CRD in a `*.k8s.io` or `*.kubernetes.io` group without this
#: annotation (KEP-1111). fleet serves ACK Kube Queue's and the ElasticQuotaTree's groups, which
#: are such groups, without a Kubernetes API review: the value says so, as the KEP allows.
APPROVAL_ANNOTATION = "api-approved.kubernetes.io"
UNAPPROVED = "unapproved, fleet serves the Kube Queue API that ACK One defines in this group"


def is_protected_group(group: str) -> bool:
    return any(
        group == suffix or group.endswith("." + suffix) for suffix in ("k8s.io", "kubernetes.io")
    )


def crd_for(model: type[KubeResource]) -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition for a resource model."""
    info = model.crd
    names: dict[str, Any] = {
        "kind": info.kind,
        "listKind": f"{info.kind}List",
        "plural": info.plural,
        "singular": info.singular,
    }
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    if info.categories:
        names["categories"] = list(info.categories)
    version: dict[str, Any] = {"name": info.version, "served": True, "storage": True}
    if info.printer_columns:
        cols = []
        for c in info.printer_columns:
            col: dict[str, Any] = {
                "name": c.name,
                "type": c.type,
                "jsonPath": c.json_path,
                "description": c.description,
            }
            if c.priority:
                col["priority"] = c.priority
            cols.append(col)
        version["additionalPrinterColumns"] = cols
    if info.status_subresource:
        version["subresources"] = {"status": {}}
    version["schema"] = {"openAPIV3Schema": openapi_schema(model)}
    metadata: dict[str, Any] = {
        "name": info.crd_name,
        "labels": {"app.kubernetes.io/part-of": "fleet"},
    }
    if is_protected_group(info.group):
        metadata["annotations"] = {APPROVAL_ANNOTATION: UNAPPROVED}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": info.group,
            "names": names,
            "scope": info.scope,
            "versions": [version],
        },
    }


def crd_filename(model: type[KubeResource]) -> str:
    """kubebuilder's naming: <group>_<plural>.yaml."""
    return f"{model.crd.group}_{model.crd.plural}.yaml"


def render_crds() -> dict[str, str]:
    """Every CRD as YAML text, keyed by file name; deterministic, so it can be diffed."""
    out: dict[str, str] = {}
    for model in RESOURCES:
        crd = crd_for(model)
        problems = structural_problems(crd)
        if problems:
            raise CrdGenError(f"{crd_filename(model)}:\n  " + "\n  ".join(problems))
        out[crd_filename(model)] = HEADER + yaml.safe_dump(
            crd, sort_keys=False, width=100, allow_unicode=True
        )
    return out


# --- Structural-schema checks (what the API server would refuse) ---------------------------


def _type_ok(value: Any, type_: str) -> bool:
    if type_ == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_ == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if type_ == "string":
        return isinstance(value, str)
    if type_ == "boolean":
        return isinstance(value, bool)
    if type_ == "object":
        return isinstance(value, dict)
    if type_ == "array":
        return isinstance(value, list)
    return False


def _value_problems(value: Any, schema: Mapping[str, Any], path: str) -> list[str]:
    """Whether a value (a default) validates against a schema node."""
    if schema.get("x-kubernetes-int-or-string"):
        if not (_type_ok(value, "integer") or _type_ok(value, "string")):
            return [f"{path}: {value!r} is neither integer nor string"]
        return []
    type_ = schema.get("type")
    if type_ is None:
        return []
    if not _type_ok(value, str(type_)):
        return [f"{path}: {value!r} is not of type {type_}"]
    out: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{path}: {value} < minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{path}: {value} > maximum {schema['maximum']}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            out.append(f"{path}: {value!r} shorter than minLength")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            out.append(f"{path}: {value!r} longer than maxLength")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            out.append(f"{path}: {value!r} does not match pattern")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for req in schema.get("required") or []:
            if req not in value:
                out.append(f"{path}: missing required {req}")
        for k, v in value.items():
            if k in props:
                out += _value_problems(v, props[k], f"{path}.{k}")
            elif isinstance(schema.get("additionalProperties"), dict):
                out += _value_problems(v, schema["additionalProperties"], f"{path}.{k}")
            elif not schema.get("x-kubernetes-preserve-unknown-fields"):
                out.append(f"{path}: unknown field {k} would be pruned")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            out += _value_problems(v, schema["items"], f"{path}[{i}]")
    return out


def _node_problems(node: Any, path: str, root: bool = False) -> list[str]:
    if not isinstance(node, dict):
        return [f"{path}: schema node is not an object"]
    out: list[str] = []
    for bad in ("$ref", "$defs", "definitions", "allOf", "oneOf", "not", "title"):
        if bad in node:
            out.append(f"{path}: {bad} is not allowed in a structural schema")
    int_or_string = bool(node.get("x-kubernetes-int-or-string"))
    preserve = bool(node.get("x-kubernetes-preserve-unknown-fields"))
    if "anyOf" in node and not (int_or_string and node["anyOf"] == _INT_OR_STRING_ANYOF):
        out.append(f"{path}: anyOf is only allowed as the int-or-string pair")
    type_ = node.get("type")
    if type_ is None and not (int_or_string or preserve):
        out.append(f"{path}: no type")
    if type_ is not None and type_ not in _TYPES:
        out.append(f"{path}: unknown type {type_!r}")
    if int_or_string and type_ is not None:
        out.append(f"{path}: x-kubernetes-int-or-string must not have a type")
    if root and node.get("nullable"):
        out.append(f"{path}: the root cannot be nullable")
    if node.get("nullable") and type_ == "object" and not node.get("properties"):
        out.append(f"{path}: nullable object without properties")
    if "properties" in node and "additionalProperties" in node:
        out.append(f"{path}: properties and additionalProperties are mutually exclusive")
    if node.get("additionalProperties") is False:
        out.append(f"{path}: additionalProperties: false is not allowed")
    if node.get("uniqueItems"):
        out.append(f"{path}: uniqueItems: true is not allowed")
    if type_ == "array" and not isinstance(node.get("items"), dict):
        out.append(f"{path}: array without a single items schema")
    if "description" in node and not isinstance(node["description"], str):
        out.append(f"{path}: description is not a string")
    for key in node:
        if key not in _ALLOWED_KEYS and key != "nullable":
            out.append(f"{path}: unsupported key {key}")
    props = node.get("properties") or {}
    for req in node.get("required") or []:
        if req not in props:
            out.append(f"{path}: required {req!r} is not a property")
    if "enum" in node and type_ is not None:
        for v in node["enum"]:
            if not _type_ok(v, str(type_)):
                out.append(f"{path}: enum value {v!r} is not a {type_}")
    if "default" in node:
        out += [f"default: {p}" for p in _value_problems(node["default"], node, path)]
    if node.get("x-kubernetes-list-type") == "map":
        keys = node.get("x-kubernetes-list-map-keys") or []
        item = node.get("items") or {}
        if not keys:
            out.append(f"{path}: list-type map needs x-kubernetes-list-map-keys")
        for k in keys:
            if k not in (item.get("required") or []):
                out.append(f"{path}: map key {k!r} must be required in the items")
    for name, sub in props.items():
        out += _node_problems(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        out += _node_problems(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        out += _node_problems(node["additionalProperties"], f"{path}{{}}")
    return out


_SEGMENT: Final = re.compile(r"((?:\\.|[^.\[\\])*)((?:\[[^\]]*\])*)")


def _json_path_problem(schema: Mapping[str, Any], json_path: str) -> str | None:
    """None if a kubectl JSONPath names a field the schema has (filters and indexes allowed)."""
    if not json_path.startswith("."):
        return f"{json_path}: must start with '.'"
    rest = json_path[1:]
    segments: list[tuple[str, int]] = []
    pos = 0
    while pos < len(rest):
        m = _SEGMENT.match(rest, pos)
        if m is None or m.end() == pos:
            return f"{json_path}: cannot parse at {rest[pos:]!r}"
        name = m.group(1).replace("\\.", ".")
        segments.append((name, m.group(2).count("[")))
        pos = m.end()
        if pos < len(rest):
            if rest[pos] != ".":
                return f"{json_path}: cannot parse at {rest[pos:]!r}"
            pos += 1
    node: Mapping[str, Any] = schema
    for i, (name, indexes) in enumerate(segments):
        if i == 0 and name == "metadata":
            tail = segments[1:]
            if tail and tail[0][0] not in _OBJECT_META_FIELDS:
                return f"{json_path}: metadata has no field {tail[0][0]!r}"
            return None
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return None
        props = node.get("properties") or {}
        if name in props:
            node = props[name]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return f"{json_path}: no field {name!r} in the schema"
        for _ in range(indexes):
            if node.get("type") != "array" or not isinstance(node.get("items"), dict):
                return f"{json_path}: {name!r} is not an array"
            node = node["items"]
    return None


def structural_problems(crd: Mapping[str, Any]) -> list[str]:
    """What an API server would refuse (or silently mangle) in a CRD; empty when it is fine."""
    out: list[str] = []
    if crd.get("apiVersion") != "apiextensions.k8s.io/v1":
        out.append("apiVersion must be apiextensions.k8s.io/v1")
    if crd.get("kind") != "CustomResourceDefinition":
        out.append("kind must be CustomResourceDefinition")
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group = spec.get("group") or ""
    plural = names.get("plural") or ""
    if (crd.get("metadata") or {}).get("name") != f"{plural}.{group}":
        out.append("metadata.name must be <plural>.<group>")
    approval = ((crd.get("metadata") or {}).get("annotations") or {}).get(APPROVAL_ANNOTATION)
    if is_protected_group(group) and not approval:
        out.append(f"group {group} is protected: metadata.annotations needs {APPROVAL_ANNOTATION}")
    for key in ("plural", "singular"):
        value = names.get(key) or ""
        if not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", value):
            out.append(f"names.{key} {value!r} is not a lowercase DNS label")
    if names.get("listKind") != f"{names.get('kind')}List":
        out.append("names.listKind must be <kind>List")
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        out.append("scope must be Namespaced or Cluster")
    versions: Sequence[Mapping[str, Any]] = spec.get("versions") or []
    if sum(1 for v in versions if v.get("storage")) != 1:
        out.append("exactly one version must be the storage version")
    for v in versions:
        vname = v.get("name") or "?"
        schema = ((v.get("schema") or {}).get("openAPIV3Schema")) or {}
        if schema.get("type") != "object":
            out.append(f"{vname}: the root schema must be of type object")
        out += [f"{vname}: {p}" for p in _node_problems(schema, "", root=True)]
        meta = (schema.get("properties") or {}).get("metadata")
        if meta is not None and set(meta) - {"type"}:
            out.append(f"{vname}: metadata may only be declared as type: object")
        if "status" in (v.get("subresources") or {}) and "status" not in (
            schema.get("properties") or {}
        ):
            out.append(f"{vname}: status subresource without a status property")
        for col in v.get("additionalPrinterColumns") or []:
            if col.get("type") not in ("integer", "number", "string", "boolean", "date"):
                out.append(f"{vname}: printer column {col.get('name')}: bad type")
            problem = _json_path_problem(schema, str(col.get("jsonPath") or ""))
            if problem:
                out.append(f"{vname}: printer column {col.get('name')}: {problem}")
    return out


# --- CLI -------------------------------------------------------------------------------------


def _check(directory: Path) -> list[str]:
    expected = render_crds()
    out: list[str] = []
    for name, text in expected.items():
        path = directory / name
        if not path.exists():
            out.append(f"{path}: missing")
        elif path.read_text() != text:
            out.append(f"{path}: differs from the models")
    for path in sorted(directory.glob("*.yaml")):
        if path.name not in expected and path.read_text().startswith(HEADER):
            out.append(f"{path}: generated file no model produces any more")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fleet.api.crdgen", description="Generate fleet's CRDs from its models."
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", metavar="DIR", type=Path, help="write the CRDs into DIR")
    group.add_argument("--check", metavar="DIR", type=Path, help="fail if DIR is out of date")
    args = parser.parse_args(argv)
    if args.check is not None:
        problems = _check(args.check)
        for p in problems:
            print(p, file=sys.stderr)
        if problems:
            print("run: python -m fleet.api.crdgen --write " + str(args.check), file=sys.stderr)
        return 1 if problems else 0
    rendered = render_crds()
    if args.write is not None:
        args.write.mkdir(parents=True, exist_ok=True)
        for path in sorted(args.write.glob("*.yaml")):
            if path.name not in rendered and path.read_text().startswith(HEADER):
                path.unlink()
        for name, text in rendered.items():
            target = args.write / name
            if not target.exists() or target.read_text() != text:
                target.write_text(text)
                print(f"wrote {target}")
        return 0
    sys.stdout.write("---\n".join(rendered.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
