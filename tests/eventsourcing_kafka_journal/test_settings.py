"""Settings come from the library's Environment with the project's names."""

from __future__ import annotations

import pytest
from eventsourcing.utils import Environment

from eventsourcing_kafka_journal import Factory
from eventsourcing_kafka_journal.connection import settings_of
from journal.errors import InvalidValue


def test_topic_and_keyspace_default_from_the_applications_name() -> None:
    settings = settings_of(Environment("BankAccounts", {}))
    assert (settings.topic, settings.keyspace) == ("BankAccounts", "bankaccounts")


def test_an_applications_prefixed_variable_wins_over_the_plain_one() -> None:
    env = Environment(
        "BankAccounts",
        {
            "KJ_TOPIC": "shared",
            "BANKACCOUNTS_KJ_TOPIC": "accounts",
            "KJ_KAFKA_BOOTSTRAP": "kafka:9092",
            "KJ_CASSANDRA_HOSTS": "c1,c2",
        },
    )
    settings = settings_of(env)
    assert settings.topic == "accounts"
    assert settings.kafka_bootstrap == "kafka:9092"
    assert settings.cassandra_host_list == ("c1", "c2")


def test_names_kafka_and_cassandra_refuse_are_made_legal() -> None:
    settings = settings_of(Environment("Bank Accounts/EU", {}))
    assert (settings.topic, settings.keyspace) == ("Bank_Accounts_EU", "bank_accounts_eu")


def test_without_a_name_the_defaults_are_eventsourcing() -> None:
    settings = settings_of(Environment("", {}))
    assert (settings.topic, settings.keyspace) == ("eventsourcing", "eventsourcing")


def test_a_tracking_group_that_is_not_a_group_name_is_refused_before_connecting() -> None:
    factory = Factory(Environment("Counter", {"KJ_TRACKING_GROUP": "two words"}))
    with pytest.raises(InvalidValue, match="not a subscription group name"):
        factory.application_recorder()
