"""The JSON Schema of ``ledger.json`` as ``sapa verify`` and ``sapa.load_ledger`` read it back: every value the merge, the
table and the reports use.

A ledger read from ``--out`` (to merge a rerun into, or to keep an interrupted run's verdicts beside) may have been
edited by hand or by a tool. It is checked against :data:`LEDGER` (and each entry it keeps against :data:`ENTRY`)
before any work starts and before anything is written, so a wrong type is one line naming where it is — never a
TypeError after ``ledger.json`` was rewritten and ``report.html`` left stale. Checked with ``jsonschema``
(Draft 2020-12); ``tests/sapa/api/test_ledger_schema.py`` mutates every field of a real ledger to check that
whatever the schema admits renders.
"""

from __future__ import annotations

from functools import lru_cache

_TEXT = {"type": "string"}
_TEXTS = {"type": "array", "items": _TEXT}
_NUMBER = {"type": "number"}
_OBJECT = {"type": "object"}


def _verdict() -> dict:
    from sapa.ledger import VERDICTS

    return {"enum": list(VERDICTS)}


def _nullable(schema: dict) -> dict:
    """``schema`` or null (one type list, so a mismatch names both types)."""
    return {**schema, "type": [schema["type"], "null"]}


def _entry() -> dict:
    """One claim of ``claims``: the fields of :class:`sapa.ledger.Entry` the reports and the table read."""
    calibration = {"type": "object", "properties": {
        "exact": {"type": "boolean"}, "note": _TEXT, "command": _TEXT,
        **{k: _nullable(_NUMBER) for k in ("false_fails_rate", "false_holds_rate", "power")}}}
    reading = {"type": "object", "required": ["name", "verdict", "rule"], "properties": {
        "name": _TEXT, "statement": _TEXT, "verdict": _verdict(), "rule": _TEXT, "why": _TEXT,
        "key": {"type": "array"}, "calibration": _nullable(calibration)}}
    control = {"type": "object", "required": ["statement", "verdict"],
               "properties": {"statement": _TEXT, "verdict": _TEXT, "control_ok": {"type": "boolean"}}}
    varied = {"type": "object", "required": ["condition", "verdict"],
              "properties": {"condition": _TEXT, "reading": _TEXT, "note": _TEXT},
              # a row with no verdict is shown by its note
              "if": {"properties": {"verdict": {"type": "null"}}}, "then": {"required": ["note"]}}
    return {
        "type": "object",
        "required": ["id", "statement", "verdict", "evidence"],
        "properties": {
            "id": _TEXT, "statement": _TEXT, "verdict": _verdict(), "evidence": _OBJECT, "figures": _TEXTS,
            "headline": _TEXT, "tested_statement": _TEXT, "corrected_claim": _nullable(_TEXT),
            "answer": _nullable(_TEXT), "findings": _TEXTS, "seconds": _NUMBER,
            "kind": {"enum": ["claim", "question"]}, "readings": {"type": "array", "items": reading},
            "contract": _nullable({"type": "object", "properties": {"logit_scale": _TEXT, "logit_note": _TEXT}}),
            "rule": _nullable(_OBJECT),
            "falsifiability": _nullable({"type": "object", "properties": {
                "kind": _TEXT, "why": _TEXT, "negative_control": _nullable(control)}}),
            "robustness": _nullable({"type": "object", "properties": {
                "stable": {"type": "boolean"}, "flips": _TEXTS, "varied": {"type": "array", "items": varied},
                "distance": _TEXT}}),
            "regime": _nullable({"type": "object", "properties": {"boundary": _TEXT}}),
            "rerun": {"type": "boolean"}, "rerun_utc": _nullable(_TEXT),
        },
    }


def _ledger() -> dict:
    """The document: claims (each with a text id; the entries kept are checked against :data:`ENTRY` apart),
    provenance and the Monte Carlo summary."""
    check = {"type": "object", "required": ["name", "covered", "nominal"], "properties": {
        "name": _TEXT, "covered": {"type": "boolean"}, "nominal": _NUMBER,
        "detail": {"type": "object", "properties": {"draws": _TEXT}}}}
    ids = {"type": "object", "properties": {"finished": _TEXTS, "not_run": _TEXTS}}
    return {
        "type": "object",
        "required": ["claims", "provenance"],
        "properties": {
            "claims": {"type": "array", "items": {"type": "object", "required": ["id"], "properties": {"id": _TEXT}}},
            "monte_carlo": {"type": "object", "properties": {
                "first_pass_coverage": _nullable(_NUMBER), "nominal": _NUMBER, "series": {"type": "integer"},
                "checks": {"type": "array", "items": check}}},
            "provenance": {"type": "object", "properties": {
                "wall_seconds": _NUMBER, "started_utc": _TEXT,  # budget, seed: compared whatever their type
                "earlier_runs": {"type": "array", "items": _OBJECT}, "reran": _TEXTS,
                "interrupted": ids, "partial": ids}},
        },
    }


@lru_cache(maxsize=2)
def _validator(which: str):
    import jsonschema

    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **(_ledger() if which == "ledger" else _entry())}
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def ledger_problem(doc: object) -> str | None:
    """Where and how ``doc`` (a parsed ``ledger.json``) breaks :func:`_ledger`'s schema, in one line; None if it fits.

    >>> ledger_problem({"claims": [], "provenance": {"earlier_runs": 5}})
    "provenance.earlier_runs: 5 is not of type 'array'"
    """
    return _first_error(_validator("ledger"), doc, "")


def entry_problem(entry: object) -> str | None:
    """Where and how one kept claim breaks the entry schema, in one line (None when it fits).

    >>> entry_problem({"id": "a", "statement": "s", "verdict": "HOLDS", "evidence": {}, "readings": "garbage"})
    "readings: 'garbage' is not of type 'array'"
    """
    return _first_error(_validator("entry"), entry, "")


def _first_error(validator, doc: object, prefix: str) -> str | None:
    import jsonschema

    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is None:
        return None
    where = prefix + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    message = " ".join(error.message.split())
    if len(message) > 160:
        message = message[:157] + "..."
    return f"{where}: {message}" if where else message
