"""The service's OpenAPI document, as committed in docs/openapi.json.

Regenerate it after changing a route or a schema: ``python -m anaphora.server.openapi > docs/openapi.json``
(tests/unit/server/test_openapi.py fails, naming this command, while the two differ).
"""

from __future__ import annotations

import json
import sys
from typing import Any

REGENERATE = "python -m anaphora.server.openapi > docs/openapi.json"


def spec() -> dict[str, Any]:
    """The OpenAPI document of :func:`anaphora.server.create_app`; it does not depend on the settings' values."""
    from anaphora.server.app import create_app
    from anaphora.settings import Settings

    settings = Settings(auth="none", chat_model="fake", embedder="hashing", config_file=None)
    return create_app(settings).openapi()


def render() -> str:
    return json.dumps(spec(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
