"""The HTTP plumbing the fake Kubernetes API servers of the tests share.

:class:`JsonServer` listens on 127.0.0.1 (a free port), reads each request's JSON body and hands
``(method, url, body)`` to the fake's own ``handle`` under one lock, and sends back what it
answers: ``(code, answer)`` or ``(code, answer, content_type)``, the answer a JSON-able value or
bytes. The fakes (``fake_kube.FakeKube``, ``cluster_fake.FakeCluster``, the validate role's
``FakeKube``) keep only what they play.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonServer(object):
    def __init__(self, handle, empty_body=None):
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                return

            def _handle(self, method):
                url = urllib.parse.urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else empty_body
                with server.lock:
                    answer = handle(method, url, body)
                code, data, content_type = (tuple(answer) + ("application/json",))[:3]
                data = data if isinstance(data, bytes) else json.dumps(data).encode()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                self._handle("GET")

            def do_POST(self):  # noqa: N802
                self._handle("POST")

            def do_PATCH(self):  # noqa: N802
                self._handle("PATCH")

            def do_PUT(self):  # noqa: N802
                self._handle("PUT")

            def do_DELETE(self):  # noqa: N802
                self._handle("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self, silent=False):
        """Stop answering; ``silent`` keeps the socket listening, so that a client's connection is
        taken and never answered (a cluster that does not answer, not one that refuses)."""
        self.server.shutdown()
        if not silent:
            self.server.server_close()
