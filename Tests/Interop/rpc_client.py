#!/usr/bin/env python3
"""Calls a Swift Gatehouse RPC server with envelopes built from proto/*.proto alone.

usage: rpc_client.py GENERATED_DIR ENDPOINT
Prints one JSON object of results and exits non-zero when a check fails.
"""
import json
import sys

sys.path.insert(0, sys.argv[1])
import zmq  # noqa: E402
import envelope_pb2  # noqa: E402
import rpc_testing_pb2  # noqa: E402

endpoint = sys.argv[2]
ctx = zmq.Context()
sock = ctx.socket(zmq.DEALER)
sock.setsockopt(zmq.LINGER, 0)
sock.setsockopt(zmq.RCVTIMEO, 5000)
sock.connect(endpoint)

failures = []
results = {}


def call(request_id, method, body, version=1, raw_header=None):
    header = envelope_pb2.RequestHeader(version=version, request_id=request_id, method=method, timeout_ms=3000)
    frames = [raw_header if raw_header is not None else header.SerializeToString(), body]
    sock.send_multipart(frames)
    reply = sock.recv_multipart()
    if len(reply) != 2:
        failures.append(f"{method}: reply has {len(reply)} frames")
        return None, None
    rh = envelope_pb2.ReplyHeader.FromString(reply[0])
    if rh.request_id != request_id:
        failures.append(f"{method}: reply id {rh.request_id} != {request_id}")
    return rh, reply[1]


# 1. A real call.
rh, body = call(7, "test.echo", rpc_testing_pb2.Ping(text="hello from python ✓").SerializeToString())
if rh is not None:
    if rh.HasField("error"):
        failures.append(f"echo failed: {rh.error.code} {rh.error.message}")
    else:
        pong = rpc_testing_pb2.Pong.FromString(body)
        results["echo"] = pong.text
        if pong.text != "hello from python ✓":
            failures.append(f"echo returned {pong.text!r}")

# 2. Unknown method.
rh, _ = call(8, "test.nope", b"")
if rh is not None:
    results["unknown"] = rh.error.code
    if rh.error.code != "unimplemented":
        failures.append(f"unknown method gave {rh.error.code!r}")

# 3. Unsupported version.
rh, _ = call(9, "test.echo", b"", version=99)
if rh is not None:
    results["version"] = rh.error.code
    if rh.error.code != "unsupported_version":
        failures.append(f"version 99 gave {rh.error.code!r}")

# 4. A header that does not decode as a whole but whose request id is readable:
#    field 2 = 10, then field 3 declared as a 100-byte string with 1 byte present.
rh, _ = call(10, "", b"", raw_header=bytes([0x10, 0x0A, 0x1A, 0x64, 0x41]))
if rh is not None:
    results["malformed"] = rh.error.code
    if rh.error.code != "malformed_request":
        failures.append(f"malformed header gave {rh.error.code!r}")

# 5. A body that does not decode (a string field with invalid UTF-8).
rh, _ = call(11, "test.echo", bytes([0x0A, 0x02, 0xC3, 0x28]))
if rh is not None:
    results["bad_body"] = rh.error.code
    if rh.error.code != "malformed_request":
        failures.append(f"invalid UTF-8 body gave {rh.error.code!r}")

# 6. Still serving after all that.
rh, body = call(12, "test.echo", rpc_testing_pb2.Ping(text="again").SerializeToString())
if rh is not None and not rh.HasField("error"):
    results["again"] = rpc_testing_pb2.Pong.FromString(body).text

results["failures"] = failures
print(json.dumps(results))
sys.exit(1 if failures else 0)
