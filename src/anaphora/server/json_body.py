"""Request bodies read as JSON by hand (where a route cannot let FastAPI parse them), with the same refusals."""

from __future__ import annotations

import json
from typing import Any

from anaphora.errors import InvalidJSONError

JSON_HINT = "send a JSON object with the header Content-Type: application/json"


def parse_json(raw: bytes) -> Any:
    """The JSON value in ``raw``, or :class:`InvalidJSONError`: invalid UTF-8, a syntax error, nesting deeper than
    the parser follows, or an integer longer than Python converts (4300 digits)."""
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidJSONError(f"the request body is not valid UTF-8: {exc.reason}", hint=JSON_HINT) from exc
    except RecursionError as exc:
        raise InvalidJSONError("the request body is not valid JSON: nested too deeply", hint=JSON_HINT) from exc
    except ValueError as exc:  # JSONDecodeError, and the int-digits limit
        raise InvalidJSONError(f"the request body is not valid JSON: {exc}", hint=JSON_HINT) from exc
