"""JSON log lines (app/logs.py): one object a line, with the request's id while it is handled."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import orjson

from app.logs import JsonFormatter, json_logging
from journal.errors import KafkaUnavailable
from journal.metrics import Metrics
from tests.support.fake_backend import FakeBackend
from tests.support.http_api import journal_path
from tests.web.served import serve
from web import create_app
from web.request_id import current_request_id


@contextmanager
def json_lines(logger: str) -> Iterator[io.StringIO]:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    target = logging.getLogger(logger)
    target.addHandler(handler)
    try:
        yield out
    finally:
        target.removeHandler(handler)


def test_a_line_is_one_object_with_its_fields() -> None:
    with json_lines("tests.logs") as out:
        log = logging.getLogger("tests.logs")
        log.warning("two\nlines: %s", "joined")
        token = current_request_id.set("r-1")
        try:
            try:
                raise ValueError("boom")
            except ValueError:
                log.exception("failed")
        finally:
            current_request_id.reset(token)
    first, second = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert set(first) == {"time", "level", "logger", "message"}
    assert (first["level"], first["logger"], first["message"]) == (
        "WARNING",
        "tests.logs",
        "two\nlines: joined",
    )
    assert first["time"].endswith("+00:00")
    assert second["request_id"] == "r-1" and second["level"] == "ERROR"
    assert "ValueError: boom" in second["exception"]


async def test_a_requests_lines_carry_its_id() -> None:
    backend = FakeBackend(failure=KafkaUnavailable("Kafka is down"))
    with json_lines("web") as out:
        async with serve(create_app(backend, metrics=Metrics())) as served:
            headers = {"X-Request-Id": "req-42", "Authorization": "Bearer secret-token"}
            url = served.at(journal_path("j", "/events"))
            async with served.session.get(url, headers=headers) as response:
                assert response.status == 503
    lines = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert lines and all(line["request_id"] == "req-42" for line in lines), lines
    assert "secret-token" not in out.getvalue()


def test_the_logging_config_writes_json_at_the_level_given() -> None:
    config = json_logging("debug")
    assert config["root"] == {"level": "DEBUG", "handlers": ["default"]}
    assert config["handlers"]["default"]["formatter"] == "json"
