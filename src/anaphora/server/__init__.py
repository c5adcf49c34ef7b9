"""The HTTP service: an OpenAI-compatible chat-completions endpoint, a conversations API, auth and metrics.

Needs the ``server`` extra (``pip install 'anaphora[server]'``). Start it with ``anaphora serve`` or build the ASGI
app with :func:`create_app`; docs/server.md is the reference.
"""

from anaphora.server.app import create_app

__all__ = ["create_app"]
