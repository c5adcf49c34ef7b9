"""Who is asking: a verified JWT's ``sub`` claim, or user "local" when auth is off (development only).

Exactly one signing algorithm is accepted (HS256 with a shared secret, or RS256 with a public key), so an HS256
token forged with the RS256 public key as its secret is refused, and so is an unsigned (``alg: none``) one.
Tokens must carry ``exp`` and ``sub``; ``iss`` and ``aud`` are checked when configured. A ``scope``/``scopes``/``scp``
claim containing ``admin`` marks an administrator.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from anaphora.errors import AuthError, ConfigurationError, MissingDependencyError, require
from anaphora.pipeline.engine import LOCAL_USER
from anaphora.settings import ServerSettings
from anaphora.text_policy import describe_invalid

ADMIN_SCOPE = "admin"
MAX_SUBJECT_CHARS = 256
MIN_DISTINCT_SECRET_CHARS = 8  # a password repeated to length ("password" x 4) has 7
MIN_RSA_BITS = 2048  # NIST SP 800-131A: shorter RSA keys are disallowed for signatures; 512 bits are factorable


@dataclass(frozen=True, slots=True)
class Principal:
    user_id: str
    admin: bool = False
    visitor: bool = False  # an anonymous visitor of public mode (anaphora.server.visitors)
    site: str | None = None  # a visitor's site: the web origin that embeds the widget


class Authenticator(Protocol):
    def authenticate(self, authorization: str | None) -> Principal: ...


class NoAuth:
    """Development mode: every request is the local user."""

    def authenticate(self, authorization: str | None) -> Principal:
        return Principal(LOCAL_USER)


def weak_secret(secret: str) -> str | None:
    """Why a long-enough HS256 secret is still guessable, or None: one short sequence repeated (``aaaa...``,
    ``abcabc...``) or fewer than :data:`MIN_DISTINCT_SECRET_CHARS` distinct characters. A random secret of 32 bytes
    or more in hex or base64 passes both with certainty."""
    if secret in (secret + secret)[1:-1]:
        return "is one short sequence of characters repeated"
    if len(set(secret)) < MIN_DISTINCT_SECRET_CHARS:
        return f"uses only {len(set(secret))} distinct characters (at least {MIN_DISTINCT_SECRET_CHARS} needed)"
    return None


def _denied(message: str, hint: str = "send a valid token: Authorization: Bearer <JWT>") -> AuthError:
    return AuthError(message, hint=hint)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    scheme, _, token = (authorization or "").partition(" ")
    return (token.strip() or None) if scheme.lower() == "bearer" else None


def _scopes(claims: dict[str, Any]) -> set[str]:
    scopes: set[str] = set()
    for name in ("scope", "scopes", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            scopes.update(value.split())
        elif isinstance(value, list):
            scopes.update(item for item in value if isinstance(item, str))
    return scopes


class JWTAuth:
    def __init__(self, settings: ServerSettings) -> None:
        self.jwt = require("jwt", package="pyjwt[crypto]", extra="server", purpose="JWT authentication")
        secret = settings.jwt_secret.get_secret_value()
        public_key = settings.jwt_public_key.strip()
        algorithm = settings.jwt_algorithm
        if algorithm is None:
            if secret and public_key:
                raise ConfigurationError(
                    "both jwt_secret and jwt_public_key are set: which algorithm to accept is ambiguous",
                    hint="set ANAPHORA_JWT_ALGORITHM to HS256 or RS256, or unset one of the keys",
                )
            algorithm = "HS256" if secret else "RS256" if public_key else None
        if algorithm is None:
            raise ConfigurationError(
                "auth is 'jwt' but no key is configured",
                hint="set ANAPHORA_JWT_SECRET (HS256) or ANAPHORA_JWT_PUBLIC_KEY (RS256, PEM text or file), "
                "or ANAPHORA_AUTH=none on a development machine",
            )
        self.algorithm = algorithm
        self.key = self._key(algorithm, secret, public_key)
        self.issuer = settings.jwt_issuer or None
        self.audience = settings.jwt_audience or None
        self.leeway = settings.jwt_leeway_s

    def _key(self, algorithm: str, secret: str, public_key: str) -> Any:
        if algorithm == "HS256":
            if not secret:
                raise ConfigurationError(
                    "jwt_algorithm is HS256 but jwt_secret is empty", hint="set ANAPHORA_JWT_SECRET"
                )
            if len(secret.encode()) < 32:
                raise ConfigurationError(
                    "jwt_secret is shorter than 32 bytes, too short for HS256",
                    hint="use a random secret of at least 32 bytes, e.g. from: openssl rand -hex 32",
                )
            if problem := weak_secret(secret):
                raise ConfigurationError(
                    f"jwt_secret {problem}: tokens signed with it can be forged by guessing it",
                    hint="use a random secret, e.g. from: openssl rand -hex 32",
                )
            return secret
        if not public_key:
            raise ConfigurationError(
                "jwt_algorithm is RS256 but jwt_public_key is empty",
                hint="set ANAPHORA_JWT_PUBLIC_KEY to the issuer's PEM public key or the path of a PEM file",
            )
        pem = public_key if public_key.startswith("-----BEGIN") else self._read(Path(public_key).expanduser())
        algorithms = self.jwt.algorithms.get_default_algorithms()
        if "RS256" not in algorithms:
            raise MissingDependencyError("cryptography", "server", "RS256 token verification")
        try:
            key = algorithms["RS256"].prepare_key(pem)
        except (self.jwt.InvalidKeyError, ValueError, TypeError) as exc:
            raise ConfigurationError(
                f"jwt_public_key is not a usable RSA public key: {exc}",
                hint="give the PEM text (-----BEGIN PUBLIC KEY-----) or the path of a PEM file",
            ) from exc
        from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey  # there: RS256 is available

        if not isinstance(key, RSAPublicKey):  # PyJWT also loads private keys, with which verifying fails
            raise ConfigurationError(
                "jwt_public_key holds a private key: it cannot verify tokens, and it must not be on this server",
                hint="give the issuer's public key instead (openssl rsa -in private.pem -pubout), "
                "and keep the private key with the issuer only",
            )
        if key.key_size < MIN_RSA_BITS:
            raise ConfigurationError(
                f"jwt_public_key is a {key.key_size}-bit RSA key: keys under {MIN_RSA_BITS} bits can be "
                "factored and tokens forged with them",
                hint=f"have the issuer sign with an RSA key of at least {MIN_RSA_BITS} bits "
                "(openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072) and configure its public key",
            )
        return key

    @staticmethod
    def _read(path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(
                f"cannot read the JWT public key file {path}: {exc}",
                hint="ANAPHORA_JWT_PUBLIC_KEY takes PEM text or the path of a readable PEM file",
            ) from exc

    def _required(self) -> str:
        """The claims a token must carry here, for the message that names a missing one."""
        names = ["exp", "sub"] + [n for n, v in (("iss", self.issuer), ("aud", self.audience)) if v is not None]
        return ", ".join(names[:-1]) + " and " + names[-1] + " are"

    def authenticate(self, authorization: str | None) -> Principal:
        jwt = self.jwt
        if not authorization:
            raise _denied("missing credentials: no Authorization header")
        token = bearer_token(authorization)
        if token is None:
            raise _denied("the Authorization header must be 'Bearer <token>'")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise _denied(f"the bearer token is not a well-formed JWT: {exc}") from exc
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm.lower() == "none":
            raise _denied("unsigned tokens (alg 'none') are refused")
        if algorithm != self.algorithm:
            raise _denied(f"tokens signed with {algorithm} are refused: this server accepts {self.algorithm} only")
        try:
            claims = jwt.decode(
                token,
                self.key,
                algorithms=[self.algorithm],
                issuer=self.issuer,
                audience=self.audience,
                leeway=self.leeway,
                options={"require": ["exp", "sub"], "verify_aud": self.audience is not None},
            )
        except jwt.ExpiredSignatureError as exc:
            raise _denied("the token has expired", hint="get a fresh token") from exc
        except jwt.ImmatureSignatureError as exc:
            raise _denied("the token is not valid yet (nbf/iat in the future)") from exc
        except jwt.InvalidSignatureError as exc:
            raise _denied("the token's signature does not verify") from exc
        except jwt.MissingRequiredClaimError as exc:
            raise _denied(f"the token has no '{exc.claim}' claim ({self._required()} required)") from exc
        except jwt.InvalidAudienceError as exc:
            raise _denied(f"the token's audience is not {self.audience!r}") from exc
        except jwt.InvalidIssuerError as exc:
            raise _denied(f"the token's issuer is not {self.issuer!r}") from exc
        except jwt.InvalidTokenError as exc:
            raise _denied(f"the token is invalid: {exc}") from exc
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject.strip() or len(subject) > MAX_SUBJECT_CHARS:
            raise _denied(f"the token's 'sub' claim must be a non-empty string of at most {MAX_SUBJECT_CHARS} chars")
        if problem := describe_invalid(subject):  # a user id is a key in every store: it must encode and store
            raise _denied(f"the token's 'sub' claim {problem}", hint="have the issuer use a valid Unicode user id")
        return Principal(subject, admin=ADMIN_SCOPE in _scopes(claims))


def build_authenticator(settings: ServerSettings) -> Authenticator:
    """Validate the auth settings now (startup), so a misconfigured service never starts."""
    return NoAuth() if settings.auth == "none" else JWTAuth(settings)
