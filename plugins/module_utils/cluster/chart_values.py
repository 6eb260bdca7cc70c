# Copyright: (c) 2026, gpufleet.nvidia maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values a chart does not know, found before they are applied.

Helm passes any value to a chart's templates; a chart without a values schema (the gpu-operator
chart has none) ignores a name it does not read, so a value meant for another release is
silently lost. The check here reads what the chosen chart release itself knows:

- its defaults (``helm show values``): every name the chart declares;
- the schema of the custom resource its values become (``helm show crds``: the gpu-operator
  chart turns its component values into a ClusterPolicy's ``spec``, so ``spec.<component>``'s
  OpenAPI schema names the fields the chart's defaults leave commented out, such as
  ``driver.version``, and gives their types and enums);
- its dependencies (``helm show chart``): a subchart's values (``node-feature-discovery.*``) are
  the subchart's, not in the parent's defaults, and are not checked here.

A value is known when its name is in the defaults or in the schema; an empty map in the defaults
(``resources: {}``, ``devicePlugin.config.data: {}``) or a schema object without properties takes
any names. Where the schema has the field, the value's type and enum are checked too.
"""

from __future__ import annotations

_TYPES = {
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
    "array": (list, tuple),
    "object": (dict,),
}


def _named_crd(crds, crd_name):
    for doc in crds or []:
        if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition" and (doc.get("metadata") or {}).get("name") == crd_name:
            return doc
    return None


def crd_spec_schema(crds, crd_name):
    """The OpenAPI schema of ``spec`` in the CRD named ``crd_name`` (its storage version) out of
    the documents ``crds``; None when the CRD is not there."""
    crd = _named_crd(crds, crd_name)
    versions = ((crd or {}).get("spec") or {}).get("versions") or []
    chosen = next((v for v in versions if v.get("storage")), versions[0] if versions else None)
    schema = ((chosen or {}).get("schema") or {}).get("openAPIV3Schema") or {}
    return (schema.get("properties") or {}).get("spec")


def _properties(schema):
    return (schema or {}).get("properties") or {} if isinstance(schema, dict) else {}


def _takes_any_name(default, schema):
    """A map whose names are the user's: empty in the defaults, or an open object in the schema."""
    if isinstance(default, dict) and not default and not _properties(schema):
        return True
    if isinstance(schema, dict) and not _properties(schema):
        return schema.get("type") == "object" or bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    return False


def _type_problem(value, schema):
    """Why ``value`` does not fit the schema's type or enum, or None."""
    if not isinstance(schema, dict):
        return None
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            return "is %r, expected an integer or a string" % (value,)
        return None
    expected = schema.get("type")
    types = _TYPES.get(expected)
    if types and (not isinstance(value, types) or (expected in ("integer", "number") and isinstance(value, bool))):
        return "is %r, expected %s %s" % (value, "an" if expected[0] in "aeiou" else "a", expected)
    enum = schema.get("enum")
    if enum and value not in enum:
        return "is %r, expected one of %s" % (value, ", ".join(repr(e) for e in enum))
    return None


def _walk(value, default, schema, path, found):
    if isinstance(value, dict):
        if _takes_any_name(default, schema):
            return
        for key in sorted(value, key=str):
            sub = "%s.%s" % (path, key) if path else str(key)
            known_default = isinstance(default, dict) and key in default
            sub_schema = _properties(schema).get(key)
            if not known_default and sub_schema is None:
                found.append((sub, "unknown"))
                continue
            _walk(value[key], default.get(key) if known_default else None, sub_schema, sub, found)
        return
    problem = _type_problem(value, schema)
    if problem:
        found.append((path, problem))
        return
    items = schema.get("items") if isinstance(schema, dict) else None
    if isinstance(value, (list, tuple)) and isinstance(items, dict):
        for index, element in enumerate(value):
            _walk(element, None, items, "%s[%d]" % (path, index), found)


def problems(values, defaults, spec_schema=None, subcharts=()):
    """``[(path, problem)]`` of ``values`` against the chart's ``defaults``, the schema of the
    resource its top-level component values become (``spec_schema``, optional), and the names
    of its subcharts (not checked). ``problem`` is ``unknown`` or a type / enum mismatch."""
    found = []
    defaults = defaults if isinstance(defaults, dict) else {}
    spec = _properties(spec_schema)
    for key in sorted(values or {}, key=str):
        if key in subcharts:
            continue
        if key not in defaults and key not in spec:
            found.append((str(key), "unknown"))
            continue
        _walk(values[key], defaults.get(key), spec.get(key), str(key), found)
    return found


def describe(found, chart):
    """One message for the problems of :func:`problems`, naming every value."""
    unknown = [p for p, why in found if why == "unknown"]
    wrong = ["%s %s" % (p, why) for p, why in found if why != "unknown"]
    parts = []
    if unknown:
        parts.append("values the chart does not know: %s" % ", ".join(unknown))
    if wrong:
        parts.append("values the chart's schema refuses: %s" % "; ".join(wrong))
    return "helm: chart %s: %s (expected only the values this chart release declares; nothing was changed)" % (chart, "; ".join(parts))
