#!/usr/bin/env python3
"""Checks cudyn-info's JSON against its own --schema, and the schema against
the committed one (docs/cudyn-info.schema.json): fields are only ever added.

    check_info_schema.py CUDYN_INFO BASELINE [--write]

Runs `CUDYN_INFO --schema` and `CUDYN_INFO --json` (with the environment it
is given, e.g. CUDYN_DRIVER_PATH at a fake driver), then checks
  1. the report validates against the schema (the keywords the schema uses:
     type, required, properties, items, enum), and its P2P matrix ("peers")
     lists every ordered pair of devices that answered, once;
  2. every property of BASELINE is still in the schema with the same type,
     and nothing that was required became optional or went away.
--write replaces BASELINE with the current schema (after adding fields).
Exit 0 when both hold; 1 with one line per problem otherwise.
"""
import json
import subprocess
import sys

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "number": (int, float), "integer": int,
         "null": type(None)}


def type_matches(value, expected):
    """Whether value has the type, or one of the types of a list."""
    for kind in expected if isinstance(expected, list) else [expected]:
        if isinstance(value, TYPES[kind]) and not (kind in ("integer", "number") and isinstance(value, bool)):
            return True
    return False


def validate(value, schema, path, problems):
    expected = schema.get("type")
    if expected:
        if not type_matches(value, expected):
            problems.append(f"{path}: {type(value).__name__}, the schema says {expected}")
            return
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                problems.append(f"{path}: required field '{name}' is missing")
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                validate(value[name], sub, f"{path}.{name}", problems)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            validate(item, schema["items"], f"{path}[{i}]", problems)


def fields(schema, path="$"):
    """Every property path with its type and whether it is required."""
    out = {path: (schema.get("type"), True)}
    required = set(schema.get("required", []))
    for name, sub in schema.get("properties", {}).items():
        for sub_path, (kind, req) in fields(sub, f"{path}.{name}").items():
            out[sub_path] = (kind, req and (name in required if sub_path == f"{path}.{name}" else True))
    if "items" in schema:
        out.update(fields(schema["items"], f"{path}[]"))
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    tool, baseline_path = sys.argv[1], sys.argv[2]
    schema_text = subprocess.run([tool, "--schema"], check=True, capture_output=True, text=True).stdout
    schema = json.loads(schema_text)
    if "--write" in sys.argv[3:]:
        with open(baseline_path, "w") as out:
            json.dump(schema, out, indent=1)
            out.write("\n")
        print(f"wrote {baseline_path}")
        return 0
    report = json.loads(subprocess.run([tool, "--json"], check=True, capture_output=True, text=True).stdout)
    problems = []
    validate(report, schema, "$", problems)
    # The P2P matrix: one entry per ordered pair of distinct devices that answered.
    if isinstance(report.get("peers"), list):
        answered = [d.get("ordinal") for d in report.get("devices", []) if "error" not in d]
        expected = sorted((a, b) for a in answered for b in answered if a != b)
        listed = sorted((p.get("from"), p.get("to")) for p in report["peers"])
        if listed != expected:
            problems.append(f"$.peers: pairs {listed}, expected every ordered pair of answering devices {expected}")
    with open(baseline_path) as f:
        baseline = json.load(f)
    now = fields(schema)
    for path, (kind, required) in fields(baseline).items():
        if path not in now:
            problems.append(f"schema: {path} was in the committed schema and is gone (fields are only ever added)")
        elif now[path][0] != kind:
            problems.append(f"schema: {path} changed type from {kind} to {now[path][0]}")
        elif required and not now[path][1]:
            problems.append(f"schema: {path} was required and is optional now")
    if baseline.get("$id") != schema.get("$id") and len(now) == len(fields(baseline)):
        problems.append("schema: the version changed but no field was added")
    for p in problems:
        print(p)
    devices = len(report.get("devices", []))
    print(f"{'ok' if not problems else 'FAILED'}: {devices} device(s), {len(now)} schema fields, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
