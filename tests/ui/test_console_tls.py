"""The console served over HTTPS, in Debian's headless Chromium, by a worker on the TLS stack
(KJ_SECURITY=true KJ_TLS=true) with a certificate of the stack's CA.

Chromium cannot be told a CA file: on Linux it trusts the roots of an NSS database (made with
`certutil`, which this machine lacks) or of enterprise policies under /etc, and Playwright has
no option for a root either (`ignore_https_errors` only turns the check off). So the browser is
told the stack CA's key with `--ignore-certificate-errors-spki-list`: it accepts a chain that
holds that key (the worker here sends its CA after its certificate) and refuses any other, as the
control shows (the same browser told another CA's key gets ERR_CERT_AUTHORITY_INVALID). That
flag passes the chain whole, so the name and expiry checks are the other clients' to show
(tests/stack/test_tls.py: aiohttp, the drivers).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from playwright.async_api import Browser, Error, async_playwright, expect

from devtools.browser import VIEWPORT, launch
from stack import Stack
from stack.tls import new_ca, write_private
from tests.support.secured import Granted, granted_journal
from tests.support.workers import WorkerProcess, running_workers, wait_settled
from tests.ui.conftest import mint
from tests.ui.test_console import open_console, shot
from web.auth import Scope, TokenMinter

pytestmark = [pytest.mark.integration, pytest.mark.tls]


def _spki_flag(certificate: x509.Certificate) -> str:
    """Chromium's flag trusting chains that hold `certificate`'s key (base64 SHA-256 of its
    SubjectPublicKeyInfo)."""
    spki = certificate.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    digest = base64.b64encode(hashlib.sha256(spki).digest()).decode()
    return f"--ignore-certificate-errors-spki-list={digest}"


@pytest.fixture(scope="module")
async def granted(tls_stack: Stack) -> Granted:
    return await granted_journal(tls_stack, partitions=2)


@pytest.fixture(scope="module")
def https_worker(
    granted: Granted,
    tls_stack: Stack,
    minter: tuple[TokenMinter, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[WorkerProcess]:
    """One worker serving the console over HTTPS with the stack's server certificate (of its
    CA, for 127.0.0.1), HTTP security on; no client certificate asked (a browser's would go
    through Playwright's own TLS proxy, which would hide the browser's check)."""
    ca = tls_stack.settings.tls_ca
    # the server's chain with its CA, as production chains carry their intermediates: the
    # browser finds the trusted key in what the server sends
    chain = tmp_path_factory.mktemp("https") / "chain.pem"
    write_private(chain, (tls_stack.settings.tls_dir / "server.pem").read_bytes() + ca.read_bytes())
    env = {
        "KJ_HTTP_SECURITY": "on",
        "KJ_JWT_KEY_FILE": str(minter[1]),
        "KJ_HTTP_SSL_CERTFILE": str(chain),
        "KJ_HTTP_SSL_CAFILE": str(ca),
    }
    with running_workers(
        granted.settings, tmp_path_factory, count=1, app_id=granted.app_id, env=env
    ) as (one,):
        yield one


@pytest.fixture(scope="module")
async def ready_worker(
    https_worker: WorkerProcess, minter: tuple[TokenMinter, Path]
) -> WorkerProcess:
    await wait_settled([https_worker], {"Authorization": f"Bearer {mint(minter, Scope.ADMIN)}"})
    return https_worker


async def _browser_trusting(certificate: x509.Certificate) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        chromium = await launch(playwright, [_spki_flag(certificate)])
        try:
            yield chromium
        finally:
            await chromium.close()


async def test_the_console_over_https_in_a_browser_trusting_the_stack_ca(
    ready_worker: WorkerProcess, tls_stack: Stack, minter: tuple[TokenMinter, Path]
) -> None:
    assert str(ready_worker.url).startswith("https://127.0.0.1:")
    stack_ca = x509.load_pem_x509_certificate(tls_stack.settings.tls_ca.read_bytes())
    async for browser in _browser_trusting(stack_ca):
        context = await browser.new_context(viewport=VIEWPORT)  # ignore_https_errors: False
        page = await context.new_page()
        await open_console(page, ready_worker, mint(minter, Scope.ADMIN), "#/overview")
        rows = page.locator("#partitions tbody tr[data-partition]")
        await expect(rows).to_have_count(2)  # its data came over the same HTTPS
        assert page.url.startswith(f"{ready_worker.url}/ui")
        await shot(page, "overview-https")
        await context.close()


async def test_a_browser_trusting_another_ca_refuses_the_console(
    ready_worker: WorkerProcess,
) -> None:
    """The control: the same browser told another CA's key does check, and refuses."""
    async for browser in _browser_trusting(new_ca("not the stack's CA").certificate):
        context = await browser.new_context(viewport=VIEWPORT)
        page = await context.new_page()
        with pytest.raises(Error, match="net::ERR_CERT_AUTHORITY_INVALID"):
            await page.goto(str(ready_worker.url / "ui"))
        await context.close()
