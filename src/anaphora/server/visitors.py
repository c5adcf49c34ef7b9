"""Anonymous visitors of public mode: signed, short-lived visitor sessions that need no token from the host site.

A visitor token is ``av1.<payload>.<signature>``: the payload (base64url JSON) names the visitor (``v``), the site
that embeds the widget (``site``, one of ``public_origins``) and the expiry (``exp``); the signature is
HMAC-SHA256 over the payload with ``visitor_secret``. Nothing is stored server-side: a visitor is their token,
and the token travels in the ``Authorization`` header only (never in a URL, never logged).

Visitors are users named ``visitor:<id>``, so everything per user (conversations, responses, sessions, limits,
erasure) isolates them from each other as it does users; a JWT whose ``sub`` takes that form is refused in public
mode, so no signed-in user can pose as a visitor.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from anaphora.errors import AuthError, ConfigurationError
from anaphora.server.auth import Authenticator, Principal, bearer_token
from anaphora.settings import PublicSettings

log = logging.getLogger("anaphora.server")

PREFIX = "av1."
VISITOR_PREFIX = "visitor:"
MIN_SECRET_BYTES = 32


@dataclass(frozen=True, slots=True)
class VisitorSession:
    token: str
    visitor_id: str
    site: str
    expires_at: float


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class VisitorTokens:
    """Signs and verifies visitor tokens with one key (``visitor_secret``, or a random one for this process)."""

    def __init__(self, settings: PublicSettings, clock: Callable[[], float] = time.time) -> None:
        secret = settings.visitor_secret.get_secret_value().encode()
        if secret and len(secret) < MIN_SECRET_BYTES:
            raise ConfigurationError(
                f"visitor_secret is shorter than {MIN_SECRET_BYTES} bytes",
                hint="use a random secret of at least 32 bytes, e.g. from: openssl rand -hex 32",
            )
        if not secret and settings.public_mode:
            log.warning("visitor_secret is not set: visitor sessions are signed with a key of this process only")
        self.key = secret or secrets.token_bytes(32)
        self.ttl_s = settings.visitor_session_ttl_s
        self.clock = clock

    def issue(self, site: str, visitor_id: str | None = None) -> VisitorSession:
        """A fresh session for ``site``: a new visitor, or ``visitor_id`` renewed."""
        visitor = visitor_id or VISITOR_PREFIX + uuid.uuid4().hex
        expires = int(self.clock() + self.ttl_s)
        payload = _b64(json.dumps({"v": visitor, "site": site, "exp": expires}, separators=(",", ":")).encode())
        return VisitorSession(f"{PREFIX}{payload}.{self._sign(payload)}", visitor, site, float(expires))

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self.key, payload.encode("ascii"), hashlib.sha256).digest())

    def verify(self, token: str) -> Principal:
        """The visitor a token names, or :class:`AuthError` (bad form, bad signature, expired)."""
        payload, _, signature = token.removeprefix(PREFIX).partition(".")
        try:
            good = hmac.compare_digest(self._sign(payload), signature)
        except (UnicodeEncodeError, TypeError):
            good = False
        if not good:
            raise _refused("the visitor session's signature does not verify")
        try:
            claims = json.loads(_unb64(payload))
            visitor, site, expires = claims["v"], claims["site"], float(claims["exp"])
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise _refused("the visitor session is malformed") from exc
        if expires <= self.clock():
            raise _refused("the visitor session has expired")
        return Principal(visitor, visitor=True, site=site)


def _refused(message: str) -> AuthError:
    return AuthError(message, hint="start a new visitor session: POST /v1/visitor/session (the widget does this)")


def is_visitor_token(token: str) -> bool:
    return token.startswith(PREFIX)


class PublicAuth:
    """Public mode: a visitor token names a visitor; any other credentials go to the service's own authenticator."""

    def __init__(self, base: Authenticator, tokens: VisitorTokens) -> None:
        self.base = base
        self.tokens = tokens

    def authenticate(self, authorization: str | None) -> Principal:
        token = bearer_token(authorization)
        if token is not None and is_visitor_token(token):
            return self.tokens.verify(token)
        principal = self.base.authenticate(authorization)
        if principal.user_id.startswith(VISITOR_PREFIX):
            raise AuthError(
                f"user ids starting with {VISITOR_PREFIX!r} are reserved for anonymous visitors in public mode",
                hint="have the token issuer use another 'sub' for signed-in users",
            )
        return principal
