"""The one settings loader: `KJSettings`, the base of every settings model of the project.

Every setting is a field of a pydantic-settings model (`KJSettings`): its `KJ_*` variable comes
from the field (`KJ_<FIELD>` or the field's alias), and so does its command-line flag
(`flag_of`), so `--help` and the loader cannot disagree. Values: defaults, then variables,
then flags (`from_env(**overrides)`). A bad value raises `SettingsError` naming the variable or
the flag it came from.

How settings are named (the rule every model follows):
- switches are booleans spelled `true` | `false` (`on` | `off`, `yes` | `no`, `1` | `0` are
  accepted too; `on` | `off` is the old spelling of `KJ_SECURITY`, `KJ_HTTP_SECURITY`);
- a duration ends in its unit, `_S` (seconds) or `_MS` (milliseconds): `KJ_READ_WAIT_S`,
  `KJ_RETENTION_MS`, `KJ_STACK_TIMEOUT_S`;
- the HTTP API is `HTTP` everywhere: `KJ_HTTP_HOST`, `KJ_HTTP_PORT`, `KJ_HTTP_URL`,
  `KJ_HTTP_SECURITY`;
- a directory of local state is `KJ_<OWNER>_DIR`: `KJ_STACK_DIR`, `KJ_WORKER_DIR`;
- a variable means one thing: `KJ_KAFKA_BOOTSTRAP` and `KJ_CASSANDRA_HOSTS` say where the
  servers are, for every process; `KJ_EXTERNAL_KAFKA` and `KJ_EXTERNAL_CASSANDRA` tell
  `stack up` not to start its own (stack/settings.py).
Old names (`RENAMED`) keep working: setting one warns (`DeprecatedSetting`, once) naming the
new one, and when both are set the new one wins and the warning says so.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import AliasChoices, BeforeValidator, SecretStr, TypeAdapter, ValidationError
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


# Old variable -> its new name (the module's naming rule). Flags follow their variables
# (--web-port -> --http-port: app/cli.py).
RENAMED: Mapping[str, str] = {
    "KJ_WEB_HOST": "KJ_HTTP_HOST",
    "KJ_WEB_PORT": "KJ_HTTP_PORT",
    "KJ_WEB_URL": "KJ_HTTP_URL",
    "KJ_DATADIR": "KJ_WORKER_DIR",
    "KJ_STACK_TIMEOUT": "KJ_STACK_TIMEOUT_S",
    "KJ_RECORDER_TIMEOUT": "KJ_RECORDER_TIMEOUT_S",
}


class SettingsError(JournalError, ValueError):
    """A setting's value is malformed; the message names its variable or flag."""


class DeprecatedSetting(FutureWarning):
    """A setting was given by an old name or with an old meaning; the message says the new."""


def warn_deprecated(message: str) -> None:
    # one call site: the default warning filter shows each message once per process
    warnings.warn(message, DeprecatedSetting, stacklevel=2)


def renamed_use(old: str, new: str, both_given: bool) -> str:
    """The warning for `old` given (as a variable or a flag) where `new` is the name now."""
    if both_given:
        return f"{old} is deprecated and ignored: {new} is given too, and wins"
    return f"{old} is deprecated: use {new}"


def with_new_names(env: Mapping[str, str]) -> Mapping[str, str]:
    """`env` with each old variable's value under its new name (`RENAMED`), warning for
    each old one set; a new one set beside its old one wins."""
    old_set = [old for old in RENAMED if env.get(old)]  # empty: not set (env_ignore_empty)
    if not old_set:
        return env
    moved = dict(env)
    for old in old_set:
        new = RENAMED[old]
        both = bool(env.get(new))
        warn_deprecated(renamed_use(old, new, both))
        if not both:
            moved[new] = env[old]
    return moved


def lookup(get: Callable[[str], str | None], variable: str) -> str | None:
    """`variable` through `get` (a mapping's, or a library's environment), else through its
    old name with the warning: for values read outside a settings model."""
    value = get(variable) or None
    for old, new in RENAMED.items():
        old_value = get(old) if new == variable else None
        if old_value:
            warn_deprecated(renamed_use(old, new, value is not None))
            value = value or old_value
    return value


_BOOLEAN = TypeAdapter(bool)


def _switch(raw: object) -> object:
    """true | false (and the other spellings of a boolean) as the switch's on | off."""
    if isinstance(raw, str) and raw.strip().lower() in ("on", "off"):
        return raw.strip().lower()
    if isinstance(raw, bool | int | str):
        try:
            return "on" if _BOOLEAN.validate_python(raw) else "off"
        except ValidationError:
            return raw  # the Literal names the allowed values
    return raw


# A boolean setting kept as "on" | "off" in code (what KJ_SECURITY was spelled before the rule).
Switch = Annotated[Literal["off", "on"], BeforeValidator(_switch)]


def current_environment() -> Mapping[str, str]:
    """The variables being loaded from (`from_env`'s `env`, else os.environ), each old name's
    value under its new one (`RENAMED`)."""
    env = _ENVIRONMENT.get()
    return with_new_names(os.environ if env is None else env)


def _given_environment() -> Mapping[str, str]:
    env = _ENVIRONMENT.get()
    return os.environ if env is None else env


def _source_of(variable: str) -> str:
    """The variable a value of `variable` came from: itself, or the old name it was set by."""
    env = _given_environment()
    if env.get(variable):
        return variable
    old = [old for old, new in RENAMED.items() if new == variable and env.get(old)]
    return old[0] if old else variable


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
        # always a mapping: the old names' values moved to the new ones (`with_new_names`)
        return (init_settings, _MappingEnvSource(cls, current_environment()))

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
        """Field `name`'s command-line flag: its variable as a flag (KJ_HTTP_PORT: --http-port)."""
        return flag_of_variable(cls.variable_of(name))

    @classmethod
    def settings_fields(cls) -> Iterator[tuple[type[KJSettings], str, FieldInfo]]:
        """Every field that has a variable, nested models' included, with the model it is on."""
        for name, info in cls.model_fields.items():
            nested = info.annotation
            if isinstance(nested, type) and issubclass(nested, KJSettings):
                yield from nested.settings_fields()
            else:
                yield cls, name, info


def flag_of_variable(variable: str) -> str:
    """A variable's command-line flag (KJ_HTTP_PORT: --http-port)."""
    return "--" + variable.removeprefix(ENV_PREFIX).lower().replace("_", "-")


def _describe(cls: type[KJSettings], error: ValidationError, given: Mapping[str, object]) -> str:
    owners = {name: model for model, name, _info in cls.settings_fields()}
    problems = []
    for item in error.errors(include_url=False):
        name = str(item["loc"][-1]) if item["loc"] else ""
        model = owners.get(name)
        if model is None and name.startswith(ENV_PREFIX):  # the loc is the variable itself
            where = f"{_source_of(name)}={current_environment().get(name)!r}"
        elif model is None:  # a check across fields
            where = name or cls.__name__
        elif name in given:
            where = f"{model.flag_of(name)}={given[name]!r}"
        else:
            raw = current_environment().get(model.variable_of(name))
            where = f"{_source_of(model.variable_of(name))}={raw!r}"
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
