"""/openapi.json is the HTTP API's contract: every live answer of a real `lamina serve`, success
or error, matches the schema the document publishes for its route and status code."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from .test_http import Server

httpx = pytest.importorskip("httpx")
jsonschema = pytest.importorskip("jsonschema")

DOCUMENT = "dir/sub/file.jsonl"
MESSAGES = [
    {"role": "user", "content": "Which port does the notes API listen on?"},
    {"role": "assistant", "content": "It listens on port 8040, behind the systemd unit."},
]


def chat(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in range(turns):
        out.append({"role": "user", "content": f"question {n} " + "about the cache " * 20})
        out.append({"role": "assistant", "content": f"answer {n} " + "keep it warm " * 30})
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("contract") / "home")
    yield srv
    srv.proc.terminate()
    srv.proc.wait(timeout=30)


class Contract:
    """The published document, and a check of one live answer against it."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.routes = [
            (method.upper(), template, re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", template)
                                                  + "$"), operation)
            for template, item in spec["paths"].items()
            for method, operation in item.items()
        ]  # fmt: skip
        self.seen: dict[tuple[str, str], set[int]] = {}

    def operation(self, method: str, path: str) -> tuple[str, dict[str, Any]]:
        raw = path.split("?")[0]
        for verb, template, pattern, operation in self.routes:
            if verb == method and pattern.match(raw):
                return template, operation
        raise AssertionError(f"{method} {path} is not in /openapi.json")

    def check(self, method: str, path: str, response: Any) -> None:
        template, operation = self.operation(method, path)
        status = str(response.status_code)
        documented = operation["responses"]
        assert status in documented, f"{method} {template} answered {status}: {response.text}"
        schema = documented[status]["content"]["application/json"]["schema"]
        root = {**schema, "components": self.spec["components"]}
        jsonschema.validate(response.json(), root)
        self.seen.setdefault((method, template), set()).add(response.status_code)


def test_live_answers_match_the_published_schemas(server: Server) -> None:
    spec = server.call("GET", "/openapi.json", key=None).json()
    contract = Contract(spec)

    def call(method: str, path: str, key: str | None = "a", **kw: Any) -> Any:
        response = server.call(method, path, key=key, **kw)
        contract.check(method, path, response)
        return response

    doc = quote(DOCUMENT, safe="")
    assert call("GET", "/health", key=None).status_code == 200
    assert (
        call(
            "POST", "/v1/banks/alpha/retain", json={"document": DOCUMENT, "messages": MESSAGES}
        ).status_code
        == 200
    )
    started = call(
        "POST",
        "/v1/banks/alpha/retain",
        json={"document": "note", "text": "Backups run at 03:00.", "async": True},
    )
    assert started.status_code == 202
    op = started.json()["operation"]
    assert call("GET", f"/v1/operations/{op}").status_code == 200
    assert call("GET", "/v1/banks").status_code == 200
    assert call("GET", "/v1/banks/alpha/documents").status_code == 200
    hits = call("POST", "/v1/banks/alpha/recall", json={"query": "which port?"}).json()
    assert hits["results"]
    log = "/v1/banks/alpha/logs/contract"
    assert call("POST", f"{log}/messages", json={"messages": chat(3)}).status_code == 200
    assert call("POST", f"{log}/compile", json={"budget": 4000, "reserve": 500}).status_code == 200
    assert call("POST", "/v1/compile", json={"messages": chat(3)}).status_code == 200
    assert call("GET", "/v1/banks/alpha/logs").status_code == 200
    assert call("GET", log).status_code == 200
    pin = {"mode": "raw", "messages": [0, 1]}
    assert call("PUT", f"{log}/pins/start", json=pin).status_code == 200
    clash = {"mode": "exact", "level": 1, "messages": [1, 3]}
    assert call("PUT", f"{log}/pins/clash", json=clash).status_code == 409
    assert call("DELETE", f"{log}/pins/start").status_code == 200
    memory = hits["results"][0]["id"]
    # The web inspector's reads (lamina.integrations.http_inspect) on a log that folds.
    preview = {"query": "which port?", "budget": 500}
    assert call("POST", "/v1/banks/alpha/recall/preview", json=preview).json()["block"]
    folds = "/v1/banks/alpha/logs/folds"
    assert call("POST", f"{folds}/messages", json={"messages": chat(40)}).status_code == 200
    strip = call("POST", f"{folds}/strip", json={"budget": 2000, "reserve": 500}).json()
    summary = next(s["summary"] for s in strip["stretches"] if s["summary"])
    assert call("GET", f"{folds}/summaries/{summary}").status_code == 200
    # Any other GET route (one added later) is called with the values at hand for its
    # parameters, so it is checked too without a line of its own here.
    known = {"bank": "alpha", "document": DOCUMENT, "log": "contract", "memory": memory,
             "memory_id": memory, "op_id": op, "operation": op}  # fmt: skip
    for verb, template, _, _ in contract.routes:
        if verb != "GET" or (verb, template) in contract.seen:
            continue
        names = re.findall(r"\{([^}:]+)[^}]*\}", template)
        if all(name in known for name in names):
            path = template
            for name in names:
                path = re.sub(r"\{" + name + r"[^}]*\}", quote(known[name], safe=""), path)
            call("GET", path)
    marks = f"/v1/banks/alpha/marks/{quote(memory, safe='')}"
    assert call("PUT", marks, json={"state": "wrong", "note": "a test"}).status_code == 200
    assert call("DELETE", marks).status_code == 200
    assert call("DELETE", log).status_code == 200
    assert call("DELETE", f"/v1/banks/alpha/memories/{quote(memory, safe='')}").status_code == 200
    assert call("DELETE", f"/v1/banks/alpha/documents/{doc}").status_code == 200

    # Errors, each in the documented shape for its status.
    assert call("GET", "/v1/banks", key=None).status_code == 401
    assert call("GET", "/v1/banks/alpha/documents", key="b").status_code == 404
    assert call("POST", "/v1/banks/alpha/recall", json={"query": "x", "budgte": 5}).status_code == (
        422
    )
    assert call("POST", "/v1/compile", json={"messages": chat(1), "budget": 1000,
                                             "reserve": 900}).status_code == 400  # fmt: skip
    weird = {"document": "w", "messages": [{"nothing": "here"}]}
    assert call("POST", "/v1/banks/alpha/retain", json=weird).status_code in (415, 422)
    big = {"document": "big", "text": "x" * 100_000}
    assert call("POST", "/v1/banks/alpha/retain", json=big).status_code == 413

    # Every operation the document lists was called and answered with success.
    listed = {(verb, template) for verb, template, _, _ in contract.routes}
    succeeded = {k for k, codes in contract.seen.items() if any(c < 300 for c in codes)}
    assert listed - succeeded == set()


def test_the_document_publishes_errors_security_and_strict_bodies(server: Server) -> None:
    spec = server.call("GET", "/openapi.json", key=None).json()
    schemes = spec["components"]["securitySchemes"]
    assert schemes["api_key"] == {**schemes["api_key"], "type": "http", "scheme": "bearer"}
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    error_ref = "#/components/schemas/ErrorBody"
    for template, item in spec["paths"].items():
        for method, operation in item.items():
            where = f"{method.upper()} {template}"
            responses = operation["responses"]
            ok = [code for code in responses if code.startswith("2")]
            assert ok, where
            for code in ok:
                schema = responses[code]["content"]["application/json"]["schema"]
                assert schema.get("$ref") or schema.get("anyOf"), f"{where} {code} is untyped"
            if not template.startswith("/v1/"):
                continue
            assert operation.get("security") == [{"api_key": []}], where
            for code in ("401", "422", "503"):
                assert code in responses, f"{where} documents no {code}"
            for code, answer in responses.items():
                if not code.startswith("2"):
                    schema = answer["content"]["application/json"]["schema"]
                    assert schema == {"$ref": error_ref}, f"{where} {code}"
            if "requestBody" in operation:
                ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                body = spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
                assert body["additionalProperties"] is False, where
                for code in ("413", "422"):
                    assert code in responses, f"{where} documents no {code}"
                for name, field in body["properties"].items():
                    assert field.get("description"), f"{where}: field {name!r} undescribed"


def test_unknown_body_fields_are_refused_by_name(server: Server) -> None:
    answer = server.call("POST", "/v1/banks/alpha/recall", json={"query": "x", "budgte": 5})
    assert answer.status_code == 422
    assert answer.json() == {
        "error": {"type": "invalid_request", "message": "body.budgte: unknown field"}
    }


def test_docs_page_works_offline(server: Server) -> None:
    page = server.call("GET", "/docs", key=None)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    # Nothing loaded from elsewhere: no script, no remote stylesheet, font or image.
    assert "<script" not in html and "<link" not in html and "<img" not in html
    assert "http://" not in html and "https://" not in html
    spec = server.call("GET", "/openapi.json", key=None).json()
    for path in spec["paths"]:
        assert f"<code>{path}</code>" in html, path
    assert "unknown fields are refused" in html and "budget" in html
    assert server.call("GET", "/redoc", key=None).json()["error"]["type"] == "not_found"
