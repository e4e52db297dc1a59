"""Reads GET /v1/me/events as a schema-aware tool does and checks every event against the
OpenAPI document's itemSchema (OpenAPI 3.2): each block of the stream is parsed by the HTML
standard's rules into {event, data, id, retry} (comments skipped), validated against the
itemSchema, and its `data` parsed as JSON and validated against the contentSchema of the branch
its `event` names (JSON Schema leaves contentSchema unchecked by default, so it is done here).

Usage: sse_schema.py BASE_URL ACCESS_TOKEN PROGRESS_FILE
Prints one line per event (`ok <event>` or `bad <event>: <why>`), also appended to
PROGRESS_FILE as it goes (the test waits on it), and exits 1 if any is bad, after the server
ends the stream. A stream that delivers nothing within 60 s is an error.
"""
import json
import socket
import sys
import urllib.parse
import urllib.request

import jsonschema


def blocks(response):
    """Yields each event of the stream as a dict, by the HTML standard's parsing rules."""
    fields, data = {}, []
    for raw in response:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data or fields:
                item = dict(fields)
                if data:
                    item["data"] = "\n".join(data)
                yield item
            fields, data = {}, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "retry":
            if value.isdigit():
                fields["retry"] = int(value)
        elif name in ("event", "id"):
            fields[name] = value


def main():
    base, token, progress_path = sys.argv[1], sys.argv[2], sys.argv[3]
    progress = open(progress_path, "a", encoding="utf-8")

    def report(line):
        print(line, flush=True)
        progress.write(line + "\n")
        progress.flush()

    document = json.load(urllib.request.urlopen(base + "/openapi.json", timeout=10))
    media = document["paths"]["/v1/me/events"]["get"]["responses"]["200"]["content"]["text/event-stream"]
    item_schema = media["itemSchema"]

    def validator(schema):
        # The schema with the whole document as its root, so `#/components/...` resolves.
        root = dict(document)
        root.pop("$id", None)
        root.update(schema)
        return jsonschema.Draft202012Validator(root)

    items = validator(item_schema)
    branches = {}
    for ref in document["components"]["schemas"]["StreamEvent"]["oneOf"]:
        branch = document["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]
        event = branch["properties"].get("event")
        if isinstance(event, dict) and "const" in event:
            branches[event["const"]] = validator(branch["properties"]["data"]["contentSchema"])

    request = urllib.request.Request(base + "/v1/me/events", headers={"Authorization": "Bearer " + token})
    bad = 0
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.headers.get_content_type() == "text/event-stream", response.headers
        for item in blocks(response):
            name = item.get("event", "(retry)" if "retry" in item else "message")
            errors = [e.message for e in items.iter_errors(item)]
            if not errors and "data" in item:
                check = branches.get(name)
                if check is None:
                    errors = ["no branch of StreamEvent names this event"]
                else:
                    errors = [e.message for e in check.iter_errors(json.loads(item["data"]))]
            if errors:
                bad += 1
                report(f"bad {name}: {'; '.join(errors)} in {item}")
            else:
                report(f"ok {name}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    try:
        main()
    except (socket.timeout, TimeoutError) as error:
        print(f"error: {error}", flush=True)
        sys.exit(2)
