"""The HTTP API's keys from settings: the worker's token checks, `kafka-journal token`, clients.

One place resolves where the key comes from (`HttpAuthSettings`): `KJ_JWT_KEY`, `KJ_JWT_KEY_FILE`
or `KJ_JWT_JWKS_FILE`; with none of them, the local stack's HS256 secret
(`local_key_file()`, generated on first use, readable by its owner only), so `KJ_SECURITY=on`
works locally with zero configuration: the worker checks and the local clients mint with the
same key. Keys are never logged or printed.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from journal.settings import HttpAuthSettings, Settings
from web.auth import Guard, Scope, TokenMinter, TokenRules, TokenVerifier

LOCAL_KEY_NAME = "secrets/jwt-hs256.key"
CLIENT_TOKEN_TTL_S = 3600


class KeyUnusable(ValueError):
    """The configured key cannot do what is asked: mint with a public key or a JWKS."""


def local_key_file() -> Path:
    """The local stack's HS256 secret: under the stack's data dir (KJ_STACK_DIR)."""
    from stack.settings import StackSettings  # only the local default needs the stack's dir

    return StackSettings.from_env().data_dir / LOCAL_KEY_NAME


def _ensure_local_key(path: Path) -> bytes:
    """The secret in `path`, created first if missing (workers and clients race for it: the
    first link wins, the others read what it wrote)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_hex(32) + "\n")
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_bytes().strip()


def rules_of(auth: HttpAuthSettings) -> TokenRules:
    return TokenRules(
        algorithm=auth.jwt_algorithm,
        issuer=auth.jwt_issuer,
        audience=auth.jwt_audience,
        prefix_claim=auth.jwt_prefix_claim,
        group_prefix_claim=auth.jwt_group_prefix_claim,
    )


def _key_material(auth: HttpAuthSettings) -> bytes:
    """The configured secret or PEM; the local secret when none is configured (HS256 only)."""
    if auth.jwt_key is not None:
        return auth.jwt_key.get_secret_value().encode()
    if auth.jwt_key_file is not None:
        return auth.jwt_key_file.read_bytes().strip()
    return _ensure_local_key(local_key_file())  # HS256: the settings refuse others keyless


def _is_private_pem(material: bytes) -> bool:
    return b"PRIVATE KEY-----" in material


def verifier_of(auth: HttpAuthSettings) -> TokenVerifier:
    """What checks tokens on a worker."""
    rules = rules_of(auth)
    if auth.jwt_jwks_file is not None:
        return TokenVerifier(rules, jwks=jwt.PyJWKSet.from_json(auth.jwt_jwks_file.read_text()))
    material = _key_material(auth)
    key: Any = material
    if auth.jwt_algorithm != "HS256" and _is_private_pem(material):
        key = load_pem_private_key(material, password=None).public_key()
    return TokenVerifier(rules, key=key)


def guard_of(settings: Settings) -> Guard | None:
    """The worker's token check; None when HTTP security is off."""
    if not settings.http_security_on:
        return None
    auth = settings.http_auth
    return Guard(verifier_of(auth), metrics_open=auth.metrics_open)


def minter_of(auth: HttpAuthSettings) -> TokenMinter:
    """What signs tokens this configuration accepts: needs the secret or the private key."""
    if auth.jwt_jwks_file is not None:
        raise KeyUnusable("a JWKS holds public keys only: tokens come from its issuer")
    material = _key_material(auth)
    if auth.jwt_algorithm != "HS256" and not _is_private_pem(material):
        raise KeyUnusable("the configured key is public: minting needs the private PEM key")
    return TokenMinter(rules_of(auth), material)


def client_token(settings: Settings) -> str | None:
    """The token the project's HTTP clients send: KJ_TOKEN, else (HTTP security on) one minted
    from the configured key with every scope, else none."""
    auth = settings.http_auth
    if auth.token is not None:
        return auth.token.get_secret_value()
    if not settings.http_security_on:
        return None
    return minter_of(auth).mint(
        list(Scope), ttl_s=CLIENT_TOKEN_TTL_S, subject="kafka-journal-client"
    )


def client_headers(settings: Settings) -> dict[str, str]:
    """Headers for an aiohttp session of one of the project's HTTP clients."""
    token = client_token(settings)
    return {} if token is None else {"Authorization": f"Bearer {token}"}
