"""Kafka's ACLs, described and created with the protocol's requests: the one place the project
speaks them (app/provision.py grants a journal's principals, app/grow.py mirrors a topic's
rights onto the topic it grew into).

aiokafka 0.14's admin client has no describe_acls or create_acls: its protocol module has the
requests, sent here to any broker with the client's public `send` (the admin client's own way
is private). Both need a principal the authorizer lets describe (Describe on the cluster) and
create (Alter on the cluster) ACLs: the administrator. A broker's refusal of those is
`KafkaAccessDenied` naming the right; a broker without an authorizer (security off) is
`SetupMissing`; a broker's other errors are `KafkaUnavailable` when Kafka says a retry may
succeed, else `SetupMissing`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar

from aiokafka.client import AIOKafkaClient
from aiokafka.errors import for_code
from aiokafka.protocol.admin import CreateAclsRequest, DescribeAclsRequest
from aiokafka.protocol.api import Request

from journal.errors import KafkaUnavailable, SetupMissing
from journal.kafka.driver_errors import KafkaError, core_error, kafka_denied
from kjconfig.access import KafkaAccess


class AclResource(IntEnum):  # Kafka's ResourceType
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclPattern(IntEnum):  # PatternType
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):  # AclOperation
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermission(IntEnum):  # AclPermissionType
    ANY = 1
    DENY = 2
    ALLOW = 3


_SECURITY_DISABLED = 54
_DENIED = (29, 31)  # topic, cluster authorization failed
_DESCRIBE_RIGHT = "Describe on the cluster (to describe ACLs)"
_CREATE_RIGHT = "Alter on the cluster (to create ACLs)"


@dataclass(frozen=True, slots=True)
class Acl:
    """One binding: `principal` (Kafka's form, "User:journal-client") is allowed (or denied)
    `operation` on the resource `name` (literal, or every name it prefixes) from `host`."""

    principal: str
    resource: AclResource
    name: str
    operation: AclOperation
    pattern: AclPattern = AclPattern.LITERAL
    permission: AclPermission = AclPermission.ALLOW
    host: str = "*"

    def __str__(self) -> str:
        name = f"{self.name}*" if self.pattern is AclPattern.PREFIXED else self.name
        deny = "DENY " if self.permission is AclPermission.DENY else ""
        host = "" if self.host == "*" else f" from {self.host}"
        return f"{self.principal} {deny}{self.operation.name} {self.resource.name} {name}{host}"


async def describe_acls(
    kafka: KafkaAccess, resource: AclResource, name: str, pattern: AclPattern
) -> list[Acl]:
    """Every ACL on the resource `name` of `pattern` (LITERAL: those of this very name), of
    any principal, host, operation and permission."""
    doing = f"describe the ACLs of {resource.name} {name}"
    # principal and host None: any
    request = DescribeAclsRequest(
        resource, name, pattern, None, None, AclOperation.ANY, AclPermission.ANY
    )  # fmt: skip
    (response,) = await _send(kafka, [request], doing, _DESCRIBE_RIGHT)
    _check(kafka, response.error_code, response.error_message, doing, _DESCRIBE_RIGHT)
    found = []
    for resource_type, resource_name, *pattern_type, entries in response.resources:
        for principal, host, operation, permission in entries:
            found.append(
                Acl(
                    principal,
                    _known(AclResource, resource_type),
                    resource_name,
                    _known(AclOperation, operation),
                    _known(AclPattern, pattern_type[0]) if pattern_type else AclPattern.LITERAL,
                    _known(AclPermission, permission),
                    host,
                )
            )
    return found


async def create_acls(kafka: KafkaAccess, acls: list[Acl]) -> None:
    """Create `acls` (an existing one is created again as a no-op)."""
    requests = [
        CreateAclsRequest(
            acl.resource, acl.name, acl.pattern, acl.principal, acl.host, acl.operation,
            acl.permission,
        )
        for acl in acls
    ]  # fmt: skip
    responses = await _send(kafka, requests, "create ACLs", _CREATE_RIGHT)
    for acl, response in zip(acls, responses, strict=True):
        for code, message in response.creation_responses:
            _check(kafka, code, message, f"create ACL {acl}", _CREATE_RIGHT)


async def _send(
    kafka: KafkaAccess, requests: Sequence[Request[Any]], doing: str, right: str
) -> list[Any]:
    """Each request's response, sent in turn to any broker; Kafka's transport errors as the
    core's."""
    if not requests:
        return []
    client = AIOKafkaClient(**kafka.client_options())
    try:
        await client.bootstrap()
        return [await client.send(client.get_random_node(), request) for request in requests]
    except KafkaError as error:
        raise core_error(error, f"cannot {doing}", kafka=kafka, right=right) from error
    finally:
        await client.close()


def _check(kafka: KafkaAccess, code: int, message: str | None, doing: str, right: str) -> None:
    """The core's error for a broker's error `code` answering an ACL request (0: none)."""
    if code == 0:
        return
    if code in _DENIED:
        raise kafka_denied(kafka, right)
    kind = for_code(code)
    said = f"{kind.__name__}{f': {message}' if message else ''}"
    if code == _SECURITY_DISABLED:
        raise SetupMissing(f"cannot {doing}: Kafka has no authorizer ({said})")
    if kind.retriable:
        raise KafkaUnavailable(f"cannot {doing}: {said}")
    raise SetupMissing(f"cannot {doing}: Kafka refused it ({said})")


_E = TypeVar("_E", bound=IntEnum)


def _known(kind: type[_E], code: int) -> _E:
    """`kind`'s member of `code`; one this code does not know is refused, not mirrored wrong."""
    try:
        return kind(code)
    except ValueError:
        raise SetupMissing(f"Kafka answered an unknown {kind.__name__} code {code}") from None
