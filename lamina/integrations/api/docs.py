"""`/docs`: the API's reference as one self-contained HTML page, written from /openapi.json.

FastAPI's own /docs and /redoc load Swagger UI and ReDoc from a CDN, so they are blank on a
machine without internet, which is where Lamina runs by default. This page needs nothing but
the server: no script, no stylesheet or font from elsewhere. It lists every route with its
parameters, body fields, answers and their meaning; /openapi.json remains the machine-readable
contract, for any OpenAPI tool a user has at hand.
"""

from __future__ import annotations

from html import escape
from typing import Any

__all__ = ["reference_page"]

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto;
       padding: 0 1rem; color: #222; }
h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; }
.verb { font: bold 13px monospace; padding: 1px 6px; border-radius: 3px; background: #eee; }
code { font-size: 13px; } table { border-collapse: collapse; margin: .3rem 0 .8rem; }
td, th { text-align: left; padding: 2px 10px 2px 0; vertical-align: top; }
th { font-weight: 600; color: #555; }
"""


def _type(schema: dict[str, Any]) -> str:
    """A short name for a schema's type."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(_type(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    if "const" in schema:
        return repr(schema["const"])
    if schema.get("type") == "array":
        return f"list of {_type(schema.get('items', {}))}"
    return str(schema.get("type", "any"))


def _fields(spec: dict[str, Any], ref: str) -> str:
    schema = spec["components"]["schemas"].get(ref.rsplit("/", 1)[-1], {})
    required = set(schema.get("required", ()))
    rows = [
        f"<tr><td><code>{escape(name)}</code>{'' if name in required else '?'}</td>"
        f"<td><code>{escape(_type(field))}</code></td>"
        f"<td>{escape(str(field.get('description', '')))}</td></tr>"
        for name, field in schema.get("properties", {}).items()
    ]
    return "<table>" + "".join(rows) + "</table>" if rows else ""


def reference_page(spec: dict[str, Any]) -> str:
    """The HTML reference of an OpenAPI document (FastAPI's, as /openapi.json serves it)."""
    info = spec.get("info", {})
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{escape(info.get('title', 'API'))} API</title><style>{_STYLE}</style></head>",
        f"<body><h1>{escape(info.get('title', 'API'))} {escape(info.get('version', ''))}</h1>",
        "<p>Every /v1 route needs <code>Authorization: Bearer &lt;key&gt;</code>: an API key "
        "once one exists, before that the server's local token (the local-token file in "
        "Lamina's data directory). "
        'Errors are <code>{"error": {"type", "message"}}</code>. The same '
        "contract, machine-readable: <a href='/openapi.json'>/openapi.json</a>.</p>",
    ]
    for path, item in spec.get("paths", {}).items():
        for verb, operation in item.items():
            parts.append(
                f"<h2><span class='verb'>{verb.upper()}</span> <code>{escape(path)}</code></h2>"
            )
            if operation.get("description"):
                parts.append(f"<p>{escape(operation['description'])}</p>")
            params = operation.get("parameters", [])
            if params:
                rows = "".join(
                    f"<tr><td><code>{escape(p['name'])}</code></td><td>{escape(p['in'])}</td>"
                    f"<td><code>{escape(_type(p.get('schema', {})))}</code></td>"
                    f"<td>{escape(str(p.get('description', '')))}</td></tr>"
                    for p in params
                )
                parts.append(f"<table><tr><th colspan='4'>Parameters</th></tr>{rows}</table>")
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body and "$ref" in body.get("schema", {}):
                parts.append("<p><b>Body</b> (unknown fields are refused)</p>")
                parts.append(_fields(spec, body["schema"]["$ref"]))
            for code, answer in operation.get("responses", {}).items():
                schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
                parts.append(
                    f"<p><b>{escape(code)}</b> <code>{escape(_type(schema))}</code> "
                    f"{escape(str(answer.get('description', '')))}</p>"
                )
                if code.startswith("2") and "$ref" in schema:
                    parts.append(_fields(spec, schema["$ref"]))
    parts.append("</body></html>")
    return "\n".join(parts)
