"""Serve a local ``http.server`` on a daemon thread for a test, and stop it cleanly after."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import HTTPServer


@contextmanager
def serving(httpd: HTTPServer) -> Iterator[str]:
    """Yields ``http://127.0.0.1:PORT`` while ``httpd`` serves; shuts it down, closes it and joins the thread."""
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
