#!/usr/bin/env python3
"""A refunds provider written outside gatehouse, with its own idempotency.

Python's standard library only. It binds 127.0.0.1:0 and prints the port it
got, alone on the first line of stdout, then serves until killed.

It is not the project's payments fake and does not share its code: it keys
refunds the way the IETF draft (draft-ietf-httpapi-idempotency-key-header)
describes, with choices of its own, so the gate is shown to work against a
provider it was not written with.

  POST /refunds                 a JSON object; with the key header (default
                                Idempotency-Key), the first result is stored:
                                the same key with the same body bytes replays
                                it (header Idempotency-Replayed: true), another
                                body answers 422, a key whose first request is
                                still running answers 409. The body is compared
                                byte for byte (a SHA-256 fingerprint), not as
                                JSON: a retry must send the very bytes it sent.
                                201 {"id": "rf_…", "state": "accepted",
                                "amount": …, "external_id": …}
  GET  /refunds/ID              200 the refund, 404
  GET  /refunds?external_id=X   200 {"refunds": [...]}, oldest first
  GET  /records                 {"records": [{"id", "key", "external_id",
                                "body"}], "count": n, "by_external_id": {X: n},
                                "requests": n}
  POST /control/drop-next       {"count": n} (default 1): the next n requests
                                that execute create their refund, then the
                                connection is reset without a response
  POST /control/hold-next       {"seconds": s}: the next request that executes
                                creates its refund and answers s seconds later;
                                meanwhile its key answers 409

Options: --key-header NAME, --window SECONDS (keys older are forgotten,
default 86400), --no-keys (the key header is ignored).
"""

import argparse
import hashlib
import json
import secrets
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class State:
    def __init__(self, key_header, window, keys):
        self.lock = threading.Lock()
        self.key_header = key_header
        self.window = window
        self.keys_on = keys
        self.refunds = []  # in creation order
        self.by_id = {}
        self.keys = {}  # key -> {"fingerprint", "at", "done", "status", "body"}
        self.drop_next = 0
        self.hold_next = 0.0
        self.requests = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "outside-provider/1"

    def log_message(self, fmt, *args):  # quiet: stdout carries the port
        sys.stderr.write("provider: " + (fmt % args) + "\n")

    @property
    def state(self):
        return self.server.state

    def reply(self, status, obj, replayed=False, raw=None):
        body = raw if raw is not None else (json.dumps(obj, sort_keys=True) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if replayed:
            self.send_header("Idempotency-Replayed", "true")
        self.end_headers()
        self.wfile.write(body)
        return body

    def error(self, status, code, message):
        return self.reply(status, {"error": code, "message": message})

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    def reset_connection(self):
        # A reset, not a polite close: the client learns nothing more.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()

    def do_GET(self):
        url = urlsplit(self.path)
        st = self.state
        if url.path == "/records":
            with st.lock:
                by_ext = {}
                for r in st.refunds:
                    ext = r["refund"].get("external_id")
                    if ext:
                        by_ext[ext] = by_ext.get(ext, 0) + 1
                recs = [{"id": r["refund"]["id"], "key": r["key"], "external_id": r["refund"].get("external_id"),
                         "body": r["body"]} for r in st.refunds]
                self.reply(200, {"records": recs, "count": len(recs), "by_external_id": by_ext,
                                 "requests": st.requests})
            return
        if url.path == "/refunds":
            q = parse_qs(url.query)
            if set(q) != {"external_id"} or len(q["external_id"]) != 1:
                self.error(400, "bad_query", "want ?external_id=X")
                return
            with st.lock:
                found = [r["refund"] for r in st.refunds if r["refund"].get("external_id") == q["external_id"][0]]
            self.reply(200, {"refunds": found})
            return
        if url.path.startswith("/refunds/"):
            with st.lock:
                r = st.by_id.get(url.path[len("/refunds/"):])
            if r is None:
                self.error(404, "not_found", "no such refund")
            else:
                self.reply(200, r["refund"])
            return
        self.error(404, "not_found", "no such path")

    def do_POST(self):
        url = urlsplit(self.path)
        raw = self.read_body()
        st = self.state
        if url.path == "/control/drop-next":
            n = json.loads(raw or b"{}").get("count", 1)
            with st.lock:
                st.drop_next += n
            self.reply(200, {"drop_next": st.drop_next})
            return
        if url.path == "/control/hold-next":
            s = float(json.loads(raw or b"{}").get("seconds", 1))
            with st.lock:
                st.hold_next = s
            self.reply(200, {"hold_next": s})
            return
        if url.path != "/refunds":
            self.error(404, "not_found", "no such path")
            return
        try:
            obj = json.loads(raw)
        except ValueError:
            self.error(400, "bad_json", "the body is not JSON")
            return
        amount = obj.get("amount") if isinstance(obj, dict) else None
        if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
            self.error(400, "bad_amount", "amount must be a positive integer")
            return
        key = self.headers.get(st.key_header) if st.keys_on else None
        fingerprint = hashlib.sha256(raw).hexdigest()
        now = time.monotonic()
        with st.lock:
            st.requests += 1
            if key:
                entry = st.keys.get(key)
                if entry is not None and entry["done"] and now - entry["at"] >= st.window:
                    entry = None
                    del st.keys[key]
                if entry is not None:
                    if entry["fingerprint"] != fingerprint:
                        self.error(422, "key_reused", "this key was used with another request")
                    elif not entry["done"]:
                        self.error(409, "in_progress", "a request with this key is still being processed")
                    else:
                        self.reply(entry["status"], None, replayed=True, raw=entry["body"])
                    return
                entry = {"fingerprint": fingerprint, "at": now, "done": False}
                st.keys[key] = entry
            refund = {"id": "rf_" + secrets.token_hex(10), "state": "accepted", "amount": amount}
            if isinstance(obj.get("external_id"), str):
                refund["external_id"] = obj["external_id"]
            st.refunds.append({"refund": refund, "key": key or "", "body": raw.decode("utf-8", "replace")})
            st.by_id[refund["id"]] = st.refunds[-1]
            drop = st.drop_next > 0
            if drop:
                st.drop_next -= 1
            hold, st.hold_next = st.hold_next, 0.0
            body = (json.dumps(refund, sort_keys=True) + "\n").encode()
            if key and not hold:
                entry.update(done=True, status=201, body=body)
        if hold:
            time.sleep(hold)  # the request is being processed
            with st.lock:
                if key:
                    entry.update(done=True, status=201, body=body)
        if drop:
            self.reset_connection()
            return
        self.reply(201, None, raw=body)


def main():
    ap = argparse.ArgumentParser(description="a refunds provider with its own idempotency")
    ap.add_argument("--key-header", default="Idempotency-Key")
    ap.add_argument("--window", type=float, default=86400.0)
    ap.add_argument("--no-keys", action="store_true")
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.state = State(args.key_header, args.window, not args.no_keys)
    print(srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
