"""A local Python package index for tests: PEP 691 JSON with upload times, on an
ephemeral port of 127.0.0.1, so that uv's date bounds (``exclude-newer``) can be exercised
without PyPI. (tests/ is on sys.path through its conftest.py: ``from pyindex import ...``.)
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from pep517 import write_wheel


def _wheel(directory: Path, name: str, version: str) -> Path:
    return directory / write_wheel(directory, name, version, f"VERSION = {version!r}\n")


@contextlib.contextmanager
def serve_index(directory: Path, releases: Sequence[tuple[str, str, str]]) -> Iterator[str]:
    """Serve ``releases`` ((name, version, upload time RFC 3339), one pure-Python wheel
    each, written under ``directory``); yields the index URL (``.../simple``)."""
    files = directory / "files"
    files.mkdir(parents=True)
    pages: dict[str, list[dict[str, object]]] = {}
    for name, version, uploaded in releases:
        wheel = _wheel(files, name, version)
        pages.setdefault(name, []).append(
            {
                "filename": wheel.name,
                "url": f"../../files/{wheel.name}",
                "hashes": {"sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()},
                "upload-time": uploaded,
            }
        )

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:
            self._serve(head=True)

        def do_GET(self) -> None:
            self._serve(head=False)

        def _serve(self, *, head: bool) -> None:
            parts = [p for p in self.path.split("?")[0].split("/") if p]
            if parts[:1] == ["simple"] and len(parts) == 2 and parts[1] in pages:
                body = json.dumps(
                    {"meta": {"api-version": "1.1"}, "name": parts[1], "files": pages[parts[1]]}
                ).encode()
                kind = "application/vnd.pypi.simple.v1+json"
            elif parts[:1] == ["files"] and len(parts) == 2 and (files / parts[1]).is_file():
                body, kind = (files / parts[1]).read_bytes(), "application/octet-stream"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as base:
        yield f"{base}/simple"


@contextlib.contextmanager
def serving(handler: Callable[..., http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served from a thread on an ephemeral port of 127.0.0.1 (no fixed
    port: xdist-safe); yields ``http://127.0.0.1:PORT``, shuts the server down after."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
