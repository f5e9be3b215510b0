"""An HTTP proxy in front of radosgw for fault tests: it forwards every request as it is
(the SigV4 signature covers the Host header, which is passed through unchanged) and
counts them by method; switched to `fail`, it answers every request 503 (SlowDown) without
forwarding (`fail_after = {"GET": n}`: after n GETs); `delay_get` holds each GET that long before forwarding it.

    proxy = S3Proxy(upstream_port)      # listens on 127.0.0.1, an ephemeral port
    bucket_url = "http://127.0.0.1:%d/mybucket" % proxy.port
    proxy.fail = True; proxy.reset(); ...; proxy.counts["PUT"]
    proxy.close()
"""
import http.client
import http.server
import threading
import time


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _serve(self):
        p = self.server.proxy
        body = b""
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            body = self.rfile.read(n)
        with p.lock:
            p.counts[self.command] = p.counts.get(self.command, 0) + 1
            p.paths.append((self.command, self.path))
            fail = p.fail
            limit = p.fail_after.get(self.command)
            if limit is not None and p.counts[self.command] > limit:
                fail = True
            delay = p.delay_get if self.command == "GET" else 0
        if fail:
            msg = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
                   b'<Message>the test proxy refuses everything</Message></Error>')
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(msg)
            return
        if delay:
            time.sleep(delay)
        conn = http.client.HTTPConnection("127.0.0.1", p.upstream_port, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items()}
            conn.request(self.command, self.path, body=body if n else None, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        finally:
            conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _serve


class S3Proxy:
    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.lock = threading.Lock()
        self.counts = {}
        self.paths = []
        self.fail = False
        self.fail_after = {}  # method -> how many of its requests pass before all fail
        self.delay_get = 0
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.proxy = self
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def reset(self):
        with self.lock:
            self.counts = {}
            self.paths = []

    def count(self, method, key_part=""):
        """Requests of method whose path contains key_part."""
        with self.lock:
            return sum(1 for m, p in self.paths if m == method and key_part in p)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
