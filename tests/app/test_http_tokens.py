"""The HTTP API's keys: the local default, PEM keys, a JWKS; `kafka-journal token`."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from app.cli import main
from app.http_tokens import (
    KeyUnusable,
    client_headers,
    guard_of,
    local_key_file,
    minter_of,
    verifier_of,
)
from journal.settings import HttpAuthSettings, JwtAlgorithm, Settings
from kjconfig.settings import SettingsError
from web.auth import InvalidToken, Scope


@pytest.fixture(autouse=True)
def stack_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stack dir of the test's own, and none of the caller's security variables."""
    for model, name, _info in Settings.settings_fields():
        if model in (Settings, HttpAuthSettings):
            monkeypatch.delenv(model.variable_of(name), raising=False)
    monkeypatch.setenv("KJ_STACK_DIR", str(tmp_path / "stack"))
    return tmp_path / "stack"


def pem(key: PrivateKeyTypes, path: Path, public: bool = False) -> Path:
    if public:
        data = key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    else:
        data = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    path.write_bytes(data)
    return path


def test_the_local_key_is_generated_once_under_the_stack_dir_for_its_owner_only(
    stack_dir: Path,
) -> None:
    auth = HttpAuthSettings()
    minted = minter_of(auth).mint([Scope.READ])
    path = local_key_file()
    assert path.parent.parent == stack_dir
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = path.read_bytes()
    assert verifier_of(auth).verify(minted).scopes == {"journal:read"}
    assert path.read_bytes() == key  # reused, not regenerated
    assert list(path.parent.iterdir()) == [path]  # no draft left behind


@pytest.mark.parametrize(
    ("algorithm", "private"),
    [
        ("RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        ("ES256", ec.generate_private_key(ec.SECP256R1())),
    ],
)
def test_pem_keys_sign_with_the_private_and_check_with_either(
    tmp_path: Path, algorithm: JwtAlgorithm, private: PrivateKeyTypes
) -> None:
    private_file = pem(private, tmp_path / "private.pem")
    public_file = pem(private, tmp_path / "public.pem", public=True)
    signing = HttpAuthSettings(jwt_algorithm=algorithm, jwt_key_file=private_file)
    minted = minter_of(signing).mint([Scope.WRITE], prefix="a-")
    assert jwt.get_unverified_header(minted)["alg"] == algorithm
    checking = HttpAuthSettings(jwt_algorithm=algorithm, jwt_key_file=public_file)
    for auth in (signing, checking):
        assert verifier_of(auth).verify(minted).prefix == "a-"
    with pytest.raises(KeyUnusable, match="public"):
        minter_of(checking)
    with pytest.raises(SettingsError, match="needs KJ_JWT_KEY_FILE"):
        HttpAuthSettings.from_env({"KJ_JWT_ALGORITHM": algorithm})  # no generated default
    # an HS256 server whose "secret" is the public PEM must not accept an RS/ES token
    with pytest.raises(InvalidToken):
        verifier_of(HttpAuthSettings(jwt_key_file=public_file)).verify(minted)


def test_a_jwks_file_checks_tokens_by_kid(tmp_path: Path) -> None:
    private = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(private.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "alg": "ES256", "use": "sig"}]}))
    auth = HttpAuthSettings(jwt_algorithm="ES256", jwt_jwks_file=jwks)
    claims = {"scope": "journal:read", "exp": 2**40}
    signed = jwt.encode(claims, private, algorithm="ES256", headers={"kid": "k1"})
    assert verifier_of(auth).verify(signed).scopes == {"journal:read"}
    unknown = jwt.encode(claims, private, algorithm="ES256", headers={"kid": "k2"})
    with pytest.raises(InvalidToken, match="kid"):
        verifier_of(auth).verify(unknown)
    with pytest.raises(KeyUnusable, match="JWKS"):
        minter_of(auth)


def test_one_key_source_at_most_and_secrets_never_in_a_repr(tmp_path: Path) -> None:
    (tmp_path / "k").write_text("s3cr3t-file")
    env = {"KJ_JWT_KEY": "s3cr3t-value", "KJ_JWT_KEY_FILE": str(tmp_path / "k")}
    with pytest.raises(SettingsError, match="at most one"):
        HttpAuthSettings.from_env(env)
    with pytest.raises(SettingsError, match="KJ_JWT_KEY_FILE="):  # named, before any use
        HttpAuthSettings.from_env({"KJ_JWT_KEY_FILE": str(tmp_path / "missing")})
    settings = Settings.from_env({"KJ_JWT_KEY": "s3cr3t-value", "KJ_TOKEN": "t0k3n-value"})
    assert "s3cr3t-value" not in repr(settings) and "t0k3n-value" not in repr(settings)
    assert "s3cr3t-value" not in str(settings.model_dump())


def test_security_switches_the_guard_and_what_clients_send() -> None:
    off = Settings.from_env({})
    assert guard_of(off) is None and client_headers(off) == {}
    on = Settings.from_env({"KJ_SECURITY": "on"})
    only_http = Settings.from_env({"KJ_HTTP_SECURITY": "on"})
    http_off = Settings.from_env({"KJ_SECURITY": "on", "KJ_HTTP_SECURITY": "off"})
    assert (on.http_security_on, only_http.http_security_on) == (True, True)
    assert not http_off.http_security_on and guard_of(http_off) is None
    assert guard_of(on) is not None
    # on: a client mints from the local key, with every right
    minted = client_headers(on)["Authorization"].removeprefix("Bearer ")
    assert verifier_of(on.http_auth).verify(minted).scopes == set(Scope)
    given = Settings.from_env({"KJ_SECURITY": "on", "KJ_TOKEN": "given-token"})
    assert client_headers(given) == {"Authorization": "Bearer given-token"}


def test_the_token_command_prints_a_token_the_local_configuration_accepts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["token", "--scope", "journal:read", "--scope", "journal:delete", "--prefix", "a-"]
    assert main([*argv, "--ttl", "120"]) == 0
    minted = capsys.readouterr().out.splitlines()[-1]
    grant = verifier_of(Settings.from_env({"KJ_SECURITY": "on"}).http_auth).verify(minted)
    assert grant.scopes == {"journal:read", "journal:delete"} and grant.prefix == "a-"
    claims = jwt.decode(minted, options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 120
    assert main(["token", "--scope", "journal:everything"]) == 2  # not a scope
    assert main(["token", "--scope", "journal:read", "--jwt-key", "x"]) == 2  # no secrets in argv
