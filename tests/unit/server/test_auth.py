"""Identity: JWT (HS256 / RS256), refusals with reasons, per-user scoping, admin erase, dev mode without auth."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from anaphora import ConfigurationError
from anaphora.embeddings import cache_key
from anaphora.server import create_app
from tests.server_harness import SECRET, bearer, serve, settings_for, token

pytestmark = pytest.mark.unit
QUESTION = "How do I install Kestrel on Kubernetes?"
MEMORY_COUNTS = ("memories", "memory_vectors", "entities", "profiles")
NO_MEMORY = dict.fromkeys(MEMORY_COUNTS, 0)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def handmade(header: dict, claims: dict, sign=lambda signing_input: b"") -> str:
    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    return f"{signing_input}.{b64(sign(signing_input.encode()))}"


def claims(sub: str = "alice", **extra) -> dict:
    return {"sub": sub, "exp": int(time.time()) + 300, **extra}


@pytest.fixture(scope="module")
def rsa_keys() -> tuple[rsa.RSAPrivateKey, str]:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public_pem


@pytest.fixture(scope="module")
def hs_server(tmp_path_factory):
    settings = settings_for(tmp_path_factory.mktemp("hs"), jwt_issuer="https://idp.example", jwt_audience="anaphora")
    with serve(settings) as running:
        yield running


def hs_token(sub: str = "alice", **extra) -> str:
    return token(sub, iss="https://idp.example", aud="anaphora", **extra)


def call(running, authorization: str | None) -> httpx.Response:
    headers = {"Authorization": authorization} if authorization is not None else {}
    with httpx.Client(base_url=running.url, timeout=30) as http:
        return http.get("/v1/conversations", headers=headers)


def test_a_valid_hs256_token_is_accepted(hs_server) -> None:
    assert call(hs_server, f"Bearer {hs_token()}").status_code == 200


ISSUED = {"iss": "https://idp.example", "aud": "anaphora"}
NO_EXP = {"sub": "alice", **ISSUED}
CASES = {
    "no header": (lambda: None, "no Authorization header"),
    "basic": (lambda: "Basic YWxpY2U6cHc=", "must be 'Bearer <token>'"),
    "empty bearer": (lambda: "Bearer", "must be 'Bearer <token>'"),
    "garbage": (lambda: "Bearer not.a.jwt", "not a well-formed JWT"),
    "expired": (lambda: f"Bearer {hs_token(ttl_s=-60)}", "expired"),
    "other secret": (
        lambda: f"Bearer {token('alice', key='another-secret-that-is-also-long-enough', **ISSUED)}",
        "signature does not verify",
    ),
    "alg none": (lambda: f"Bearer {handmade({'alg': 'none', 'typ': 'JWT'}, claims(**ISSUED))}", "alg 'none'"),
    "alg None": (lambda: f"Bearer {handmade({'alg': 'None'}, claims(**ISSUED))}", "alg 'none'"),
    "other alg": (
        lambda: f"Bearer {token('alice', key=SECRET * 2, algorithm='HS512', **ISSUED)}",
        "accepts HS256 only",
    ),
    "no exp": (lambda: f"Bearer {jwt.encode(NO_EXP, SECRET, algorithm='HS256')}", "'exp'"),
    "no sub": (lambda: f"Bearer {jwt.encode({'exp': int(time.time()) + 60, **ISSUED}, SECRET)}", "'sub'"),
    "no iss": (lambda: f"Bearer {token('alice', aud='anaphora')}", "no 'iss' claim (exp, sub, iss and aud are"),
    "no aud": (lambda: f"Bearer {token('alice', iss='https://idp.example')}", "no 'aud' claim (exp, sub, iss and aud"),
    "other iss": (lambda: f"Bearer {token('alice', iss='https://evil.example', aud='anaphora')}", "issuer"),
    "other aud": (lambda: f"Bearer {token('alice', iss='https://idp.example', aud='else')}", "audience"),
    "empty sub": (lambda: f"Bearer {token('', **ISSUED)}", "'sub' claim must be"),
    "not yet": (lambda: f"Bearer {token('alice', nbf=int(time.time()) + 600, **ISSUED)}", "not valid yet"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_credentials_get_401_with_a_reason(hs_server, case) -> None:
    authorization, reason = CASES[case]
    response = call(hs_server, authorization())
    assert response.status_code == 401, response.text
    error = response.json()["error"]
    assert error["type"] == "authentication_error"
    assert reason in error["message"], error
    assert response.headers["www-authenticate"].startswith("Bearer")


def test_ops_endpoints_need_no_token(hs_server) -> None:
    with httpx.Client(base_url=hs_server.url) as http:
        assert [http.get(path).status_code for path in ("/healthz", "/readyz", "/metrics")] == [200, 200, 200]


@pytest.mark.parametrize("as_file", [False, True])
def test_rs256_with_pem_text_or_file(tmp_path, rsa_keys, as_file) -> None:
    private, public_pem = rsa_keys
    key_setting = public_pem
    if as_file:
        (tmp_path / "issuer.pem").write_text(public_pem)
        key_setting = str(tmp_path / "issuer.pem")
    with serve(settings_for(tmp_path, jwt_secret="", jwt_public_key=key_setting)) as running:
        good = jwt.encode(claims(), private, algorithm="RS256")
        assert call(running, f"Bearer {good}").status_code == 200
        # the classic confusion: an HS256 token whose "secret" is the public key
        forged = handmade(
            {"alg": "HS256", "typ": "JWT"},
            claims(),
            lambda data: hmac.new(public_pem.encode(), data, hashlib.sha256).digest(),
        )
        refused = call(running, f"Bearer {forged}")
        assert refused.status_code == 401 and "accepts RS256 only" in refused.json()["error"]["message"]
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        wrong = call(running, f"Bearer {jwt.encode(claims(), other, algorithm='RS256')}")
        assert wrong.status_code == 401 and "signature" in wrong.json()["error"]["message"]


BAD_PEM = "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"jwt_secret": ""}, "no key is configured"),
        ({"jwt_secret": "short"}, "shorter than 32 bytes"),
        ({"jwt_secret": "a" * 32}, "one short sequence of characters repeated"),  # issue 51: a low-entropy secret
        ({"jwt_secret": "abc" * 20}, "one short sequence of characters repeated"),
        ({"jwt_secret": "password" + "drowssap" * 4}, "only 7 distinct characters"),
        ({"jwt_public_key": BAD_PEM}, "ambiguous"),
        ({"jwt_secret": "", "jwt_public_key": BAD_PEM}, "not a usable RSA public key"),
        ({"jwt_secret": "", "jwt_public_key": "/no/such/key.pem"}, "cannot read the JWT public key file"),
        ({"jwt_algorithm": "RS256"}, "jwt_public_key is empty"),
        ({"jwt_algorithm": "HS256", "jwt_secret": ""}, "jwt_secret is empty"),
    ],
)
def test_auth_misconfiguration_fails_before_serving(tmp_path, overrides, message) -> None:
    with pytest.raises(ConfigurationError, match=message) as error:
        create_app(settings_for(tmp_path, **overrides))
    assert error.value.hint


def test_a_private_key_given_as_the_public_key_is_refused_at_startup(tmp_path, rsa_keys) -> None:
    # found by the auth probe (issue 16): it was accepted, then every valid request got a 500
    private, _ = rsa_keys
    for encoding in (serialization.PrivateFormat.PKCS8, serialization.PrivateFormat.TraditionalOpenSSL):
        pem = private.private_bytes(serialization.Encoding.PEM, encoding, serialization.NoEncryption()).decode()
        with pytest.raises(ConfigurationError, match="jwt_public_key holds a private key") as error:
            create_app(settings_for(tmp_path, jwt_secret="", jwt_public_key=pem))
        assert "-pubout" in error.value.hint


def test_users_see_only_their_own_conversations(hs_server) -> None:
    with httpx.Client(base_url=hs_server.url, timeout=30) as http:
        alice = {"Authorization": f"Bearer {hs_token('alice')}"}
        bob = {"Authorization": f"Bearer {hs_token('bob')}"}
        conversation = http.post("/v1/conversations", json={"title": "private"}, headers=alice).json()["id"]
        assert http.get(f"/v1/conversations/{conversation}", headers=bob).status_code == 404
        posted = http.post(f"/v1/conversations/{conversation}/messages", json={"content": QUESTION}, headers=bob)
        assert posted.status_code == 404
        assert http.delete(f"/v1/conversations/{conversation}", headers=bob).status_code == 404
        assert conversation not in [c["id"] for c in http.get("/v1/conversations", headers=bob).json()["data"]]
        assert http.get(f"/v1/conversations/{conversation}", headers=alice).json()["turn_count"] == 0


def test_erase_removes_every_conversation_turn_and_summary_of_the_user(tmp_path) -> None:
    with serve(settings_for(tmp_path)) as running, running.client("alice") as alice, running.client("bob") as bob:
        ids = [alice.post("/v1/conversations", json={"title": t}).json()["id"] for t in ("one", "two", "three")]
        for conversation, turns in zip(ids, (2, 1, 0), strict=True):
            for _ in range(turns):
                alice.post(f"/v1/conversations/{conversation}/messages", json={"content": QUESTION}).raise_for_status()
        store = running.components.conversations
        asyncio.run(store.save_summary("alice", ids[0], 1, "an older summary"))
        kept = bob.post("/v1/conversations", json={"title": "bob's"}).json()["id"]

        refused = bob.delete("/v1/users/alice/data")
        assert refused.status_code == 403 and refused.json()["error"]["type"] == "permission_error"

        embedder = running.components.embedder
        cached_question = cache_key(embedder.name, QUESTION)
        assert embedder.cache.get_many([cached_question])  # the question's embedding was cached by the turns
        erased = alice.delete("/v1/users/alice/data")
        assert erased.status_code == 200
        assert erased.json() == {
            "user_id": "alice",
            "conversations": 3,
            "turns": 3,
            "summaries": 1,
            "cached_embeddings": erased.json()["cached_embeddings"],
            **{kind: erased.json()[kind] for kind in MEMORY_COUNTS},  # what the turns made her remember
        }
        assert erased.json()["cached_embeddings"] >= 1
        assert not embedder.cache.get_many([cached_question])  # the embeddings of her text are gone too
        assert alice.get("/v1/conversations").json()["data"] == []
        assert all(alice.get(f"/v1/conversations/{c}").status_code == 404 for c in ids)
        database = running.components.database
        marks = ",".join("?" * len(ids))
        for table in ("turns", "summaries"):
            assert database.query(f"SELECT COUNT(*) FROM {table} WHERE conversation_id IN ({marks})", ids)[0][0] == 0
        for table in ("memory_items", "memory_vectors", "memory_entities", "memory_profiles"):
            assert database.query(f"SELECT COUNT(*) FROM {table} WHERE user_id = 'alice'")[0][0] == 0
        assert bob.get(f"/v1/conversations/{kept}").status_code == 200  # other users untouched
        assert alice.delete("/v1/users/alice/data").json() == {
            "user_id": "alice",
            "conversations": 0,
            "turns": 0,
            "summaries": 0,
            "cached_embeddings": 0,
            **NO_MEMORY,
        }


def test_an_admin_may_erase_another_user(tmp_path) -> None:
    with serve(settings_for(tmp_path)) as running, running.client("alice") as alice:
        alice.post("/v1/conversations", json={}).raise_for_status()
        with httpx.Client(base_url=running.url, headers=bearer("ops", scope="read admin")) as admin:
            assert admin.delete("/v1/users/alice/data").json() == {
                "user_id": "alice",
                "conversations": 1,
                "turns": 0,
                "summaries": 0,
                "cached_embeddings": 0,
                **NO_MEMORY,
            }
        with httpx.Client(base_url=running.url, headers=bearer("ops2", scopes=["admin"])) as admin:
            assert admin.delete("/v1/users/bob/data").status_code == 200
        with httpx.Client(base_url=running.url, headers=bearer("ops3", scope="administrator")) as not_admin:
            assert not_admin.delete("/v1/users/alice/data").status_code == 403


def test_auth_none_makes_every_request_the_local_user(tmp_path) -> None:
    with serve(settings_for(tmp_path, auth="none", jwt_secret="")) as running, running.client(None) as http:
        created = http.post("/v1/conversations", json={"title": "dev"})
        assert created.status_code == 201
        listed = asyncio.run(running.components.conversations.list("local"))
        assert [c.id for c in listed] == [created.json()["id"]]
        assert http.delete("/v1/users/local/data").json()["conversations"] == 1


@pytest.mark.parametrize("bits", [512, 1024])
def test_an_rsa_key_under_2048_bits_is_refused_at_startup(tmp_path, bits) -> None:
    # found by the probe (issue 25): a 512-bit key was accepted, and tokens signed with it verified
    # cryptography generates no key under 1024 bits; a public key is only (n, e), so a 512-bit one is built
    weak = rsa.RSAPublicNumbers(65537, (1 << (bits - 1)) | 0xC0FFEE1).public_key()
    pem = weak.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    with pytest.raises(ConfigurationError, match=f"a {bits}-bit RSA key: keys under 2048 bits") as error:
        create_app(settings_for(tmp_path, jwt_secret="", jwt_public_key=pem))
    assert "rsa_keygen_bits" in error.value.hint


def test_random_secrets_in_hex_and_base64_pass_the_strength_check() -> None:
    import base64
    import secrets

    from anaphora.server.auth import weak_secret

    for _ in range(200):
        assert weak_secret(secrets.token_hex(32)) is None
        assert weak_secret(base64.b64encode(secrets.token_bytes(32)).decode()) is None
    assert weak_secret(SECRET) is None
