"""The one settings loader: `KJSettings`, the base of every settings model of the project.

Every setting is a field of a pydantic-settings model (`KJSettings`): its `KJ_*` variable comes
from the field (`KJ_<FIELD>` or the field's alias), and so does its command-line flag
(`flag_of`), so `--help` and the loader cannot disagree. Values: defaults, then variables,
then flags (`from_env(**overrides)`). A bad value raises `SettingsError` naming the variable or
the flag it came from.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any, Self, get_args

from pydantic import AliasChoices, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.sources.utils import parse_env_vars

from kjconfig.errors import JournalError

ENV_PREFIX = "KJ_"

# The variables `from_env(env=...)` reads instead of os.environ, for the model being built and
# the models nested in it; a context variable, so concurrent loads never see each other's.
_ENVIRONMENT: ContextVar[Mapping[str, str] | None] = ContextVar("kj_environment", default=None)


class SettingsError(JournalError, ValueError):
    """A setting's value is malformed; the message names its variable or flag."""


def current_environment() -> Mapping[str, str]:
    """The variables being loaded from: `from_env`'s `env`, else os.environ."""
    env = _ENVIRONMENT.get()
    return os.environ if env is None else env


class _MappingEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping instead of os.environ."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        self._mapping = env
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(
            self._mapping, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


class KJSettings(BaseSettings):
    """Base of every settings model: `KJ_` variables, immutable, unknown keys refused."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        frozen=True,
        extra="forbid",
        env_ignore_empty=True,  # KJ_X= means "not set", as it did before
        validate_by_name=True,  # overrides use field names even where the variable differs
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        env = _ENVIRONMENT.get()
        return (init_settings, env_settings if env is None else _MappingEnvSource(cls, env))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Self:
        """Defaults, then the `KJ_*` variables of `env` (default os.environ), then `overrides`
        (flags; None means "not given")."""
        given = {name: value for name, value in overrides.items() if value is not None}
        token = _ENVIRONMENT.set(env)
        try:
            return cls(**given)
        except ValidationError as error:
            raise SettingsError(_describe(cls, error, given)) from None
        finally:
            _ENVIRONMENT.reset(token)

    @classmethod
    def from_flags(cls, values: Mapping[str, object], env: Mapping[str, str] | None = None) -> Self:
        """`from_env` with command-line `values` (None: not given) keyed by field name, nested
        models' included (the flags are flat, as the variables are)."""
        own: dict[str, object] = {}
        for name, info in cls.model_fields.items():
            nested = info.annotation
            if isinstance(nested, type) and issubclass(nested, KJSettings):
                own[name] = nested.from_flags(values, env)
            elif name in values:
                own[name] = values[name]
        return cls.from_env(env, **own)

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes`, validated (what `dataclasses.replace` did)."""
        return type(self).model_validate({**self.model_dump(), **changes})

    @classmethod
    def variable_of(cls, name: str) -> str:
        """The environment variable of field `name`."""
        alias = cls.model_fields[name].validation_alias
        if isinstance(alias, AliasChoices):  # the variable first, then the field's own name
            alias = alias.choices[0]
        return alias if isinstance(alias, str) else f"{ENV_PREFIX}{name.upper()}"

    @classmethod
    def flag_of(cls, name: str) -> str:
        """Field `name`'s command-line flag: its variable as a flag (KJ_WEB_PORT: --web-port)."""
        return "--" + cls.variable_of(name).removeprefix(ENV_PREFIX).lower().replace("_", "-")

    @classmethod
    def settings_fields(cls) -> Iterator[tuple[type[KJSettings], str, FieldInfo]]:
        """Every field that has a variable, nested models' included, with the model it is on."""
        for name, info in cls.model_fields.items():
            nested = info.annotation
            if isinstance(nested, type) and issubclass(nested, KJSettings):
                yield from nested.settings_fields()
            else:
                yield cls, name, info


def _describe(cls: type[KJSettings], error: ValidationError, given: Mapping[str, object]) -> str:
    owners = {name: model for model, name, _info in cls.settings_fields()}
    problems = []
    for item in error.errors(include_url=False):
        name = str(item["loc"][-1]) if item["loc"] else ""
        model = owners.get(name)
        if model is None and name.startswith(ENV_PREFIX):  # the loc is the variable itself
            where = f"{name}={current_environment().get(name)!r}"
        elif model is None:  # a check across fields
            where = name or cls.__name__
        elif name in given:
            where = f"{model.flag_of(name)}={given[name]!r}"
        else:
            raw = current_environment().get(model.variable_of(name))
            where = f"{model.variable_of(name)}={raw!r}"
        problems.append(f"{where}: {item['msg']}")
    return "; ".join(problems)


def is_secret(info: FieldInfo) -> bool:
    """A secret's field: it has a variable but no flag (argv shows in `ps`) and never prints."""
    return SecretStr in (info.annotation, *get_args(info.annotation))


def describe_field(info: FieldInfo) -> str:
    """A field's description for --help: what it is and its default."""
    text = info.description or ""
    if info.default_factory is None and info.default is not None:
        text += f" (default {info.default})"
    return text.strip()
