"""The one declared shape of a record (JSON Schema), checked whenever a record is loaded.

A record is hand-reviewable JSON that people edit, merge and resolve conflicts in; what the drift check reads
from it must have the shape it expects, or the build would fail later with a ``TypeError`` far from the cause
(a list where a number belongs, a tolerance that is a string). ``validate`` names the file and the key:
``snippets/x.record.json: results → lookup → value: [1, 2] is not of type 'number', …``.

The schema describes format 2 (``records.FORMAT``). Free-form parts (``provenance``, a figure's ``data``, a
claim's comparison, calibration's ``atoms`` and ``held_out``) are checked for being objects, no deeper: they
are written by the engine and read with defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema

from transformer_book.book.results import result_kinds

SCALAR = {"type": ["number", "string", "boolean", "null"]}
KIND = {"enum": ["exact", "trained", "measured", "rounding"]}
TOLERANCE = {"type": ["object", "null"], "properties": {"rel": {"type": "number", "minimum": 0},
                                                         "abs": {"type": "number", "minimum": 0},
                                                         "reason": {"type": "string"}}}
ENGINE_SHAPES: dict[str, dict[str, Any]] = {  # what each of the engine's result kinds records
    "value": {"required": ["kind", "value"],
        "properties": {"kind": KIND, "value": SCALAR, "fmt": {"type": ["string", "null"]},
                       "tolerance": TOLERANCE}},
    "table": {"required": ["kind", "columns", "rows"],
        "properties": {"kind": KIND, "columns": {"type": "array", "items": {"type": "string"}},
                       "rows": {"type": "array", "items": {"type": "array", "items": SCALAR}},
                       "kinds": {"type": "object", "additionalProperties": KIND},
                       "tolerance": TOLERANCE}},
    "figure": {"required": ["kind"],
        "properties": {"kind": KIND, "data": {"type": "object"}, "plotted": {"type": "object"},
                       "grids": {"type": "array", "items": {
                           "type": "object", "required": ["rows", "cols"],
                           "properties": {"rows": {"type": "array", "items": SCALAR},
                                          "cols": {"type": "array", "items": SCALAR}}}},
                       "cell_format": {"type": "string"},
                       "tolerance": TOLERANCE}},
    "explorable": {"required": ["kind", "controls", "states", "show"],
        "properties": {"kind": KIND,
                       "controls": {"type": "array", "minItems": 1, "items": {
                           "type": "object", "required": ["name", "values", "labels"],
                           "properties": {"name": {"type": "string"}, "values": {"type": "array", "items": SCALAR},
                                          "labels": {"type": "array", "items": {"type": "string"}}}}},
                       "states": {"type": "array", "items": {"type": "object"}},
                       "show": {"type": "array", "items": {"type": "object", "required": ["view"]}},
                       "kinds": {"type": "object", "additionalProperties": KIND},
                       "tolerance": TOLERANCE}},
    "claim": {"required": ["statement", "holds", "check"],
        "properties": {"statement": {"type": "string"}, "holds": {"type": "boolean"},
                       "check": {"type": "object"}, "uncertain": {"type": "string"}}},
    "block": {"required": ["sha256"], "properties": {"sha256": {"type": "string"}, "kind": KIND}},
}


def _result_schema() -> dict[str, Any]:
    """One recorded result: its ``type`` is a registered kind that is recorded, with that kind's shape (the
    engine's from :data:`ENGINE_SHAPES`, a kind from outside from its ``record_shape``)."""
    kinds = {name: cls for name, cls in result_kinds().items() if cls.recorded}
    return {"type": "object", "required": ["type"], "properties": {"type": {"enum": sorted(kinds)}},
            "allOf": [{"if": {"properties": {"type": {"const": name}}},
                       "then": ENGINE_SHAPES.get(name, getattr(cls, "record_shape", {"type": "object"}))}
                      for name, cls in sorted(kinds.items())]}


SERIES = {"type": "object", "required": ["spread", "abs"],
          "properties": {"spread": {"type": "number", "minimum": 0}, "abs": {"type": "number", "minimum": 0},
                         "check": {"enum": ["band", "claims", "varies"]}, "why": {"type": "string"}}}
SCHEMA = {
    "type": "object",
    "required": ["format", "snippet", "provenance", "results"],
    "properties": {
        "format": {"const": 2},
        "snippet": {"type": "string"},
        "provenance": {"type": "object"},
        "results": {"type": "object"},  # each result: _result_schema(), from the kinds registered now
        "calibration": {"type": "object",
                        "properties": {"provenance": {"type": "object"},
                                       "series": {"type": "object", "additionalProperties": SERIES},
                                       "claims": {"type": "object", "additionalProperties": {
                                           "type": "object", "properties": {"robust": {"type": "boolean"},
                                                                            "atoms": {"type": "object"}}}},
                                       "held_out": {"type": "object"}}},
    },
}
_VALIDATORS: dict[tuple[str, ...], Any] = {}  # by the registered kinds (another kind registered: a new schema)


def _validator() -> Any:
    names = tuple(sorted(result_kinds()))
    if names not in _VALIDATORS:
        schema = {**SCHEMA, "properties": {**SCHEMA["properties"], "results": {
            "type": "object", "additionalProperties": _result_schema()}}}
        _VALIDATORS[names] = jsonschema.Draft202012Validator(schema)
    return _VALIDATORS[names]


def problems(record: Any) -> list[str]:
    """Every place where ``record`` departs from the schema: ``key → key: what is wrong``, deepest first."""
    out = []
    for error in sorted(_validator().iter_errors(record), key=lambda e: [str(p) for p in e.absolute_path]):
        where = " → ".join(str(p) for p in error.absolute_path) or "(the whole record)"
        out.append(f"{where}: {_short(error)}")
    return out


def validate(path: Path, record: Any) -> None:
    """Raise ``ValueError`` naming the file and each key whose value does not have the declared shape."""
    found = problems(record)
    if found:
        raise ValueError(f"{path}: the record does not have the shape the engine reads — " + "; ".join(found[:5])
                         + (f"; and {len(found) - 5} more" if len(found) > 5 else ""))


def _short(error: jsonschema.ValidationError) -> str:
    message = error.message
    return message if len(message) <= 160 else message[:157] + "…"
