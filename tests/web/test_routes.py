"""The route table (`web.routes.ROUTES`) is what the router serves, what the guard's scopes
cover and what /openapi.json describes: one set, and a route cannot be in one of them only."""

from __future__ import annotations

import pytest
from aiohttp import web

from tests.support.fake_backend import FakeBackend
from web.app import add_routes
from web.auth import METRICS_ROUTE, PREFIX_FILTERING_ROUTES, ROUTE_SCOPES
from web.openapi import openapi_document
from web.routes import ROUTES, Route, RouteKey


def served_routes() -> set[RouteKey]:
    app = web.Application()
    add_routes(app, FakeBackend(), middlewares=False)
    return {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
    }


def described_routes() -> set[RouteKey]:
    return {
        (method.upper(), path)
        for path, item in openapi_document()["paths"].items()
        for method in item
        if method != "parameters"
    }


def test_the_served_routes_the_scopes_and_the_openapi_paths_are_one_set() -> None:
    declared = [route.key for route in ROUTES]
    assert len(set(declared)) == len(declared) == 22
    assert served_routes() == set(ROUTE_SCOPES) == described_routes() == set(declared)
    assert METRICS_ROUTE in ROUTE_SCOPES
    assert {("GET", "/journals"), ("GET", "/events")} == PREFIX_FILTERING_ROUTES


def test_every_operation_has_its_own_operation_id() -> None:
    ids = [
        operation["operationId"]
        for item in openapi_document()["paths"].values()
        for method, operation in item.items()
        if method != "parameters"
    ]
    assert sorted(ids) == sorted({route.operation_id for route in ROUTES})


def test_a_route_without_an_operation_fails_the_document(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = Route("GET", "/extra", "ops", "healthz", None, "extra")
    monkeypatch.setattr("web.openapi.ROUTES", (*ROUTES, extra))
    with pytest.raises(KeyError, match="extra"):
        openapi_document()


def test_an_operation_without_a_route_fails_the_document(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("web.openapi.ROUTES", ROUTES[1:])
    with pytest.raises(ValueError, match=ROUTES[0].operation_id):
        openapi_document()
