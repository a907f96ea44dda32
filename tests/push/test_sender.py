"""One push to one push service: what each answer means, redirects not followed, a timeout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from bridge.push import Outcome, VapidKey, endpoint_origin, notice_for, send_push
from tests.support.push_service import PushService


@pytest.fixture
async def service() -> AsyncIterator[PushService]:
    async with PushService() as running:
        yield running


async def test_a_push_is_accepted_and_reads_back_as_its_payload(service: PushService) -> None:
    vapid = VapidKey.generate()
    browser = service.subscribe(vapid.public_key)
    keys = browser.to_json()["keys"]
    async with aiohttp.ClientSession() as session:
        sent = await send_push(
            session,
            endpoint=browser.endpoint,
            p256dh=keys["p256dh"],
            auth=keys["auth"],
            notice=notice_for("ab" * 32, "box", "question", 2),
            vapid=vapid,
            now=time.time(),
        )
    assert (sent.outcome, sent.status) == (Outcome.DELIVERED, 201)
    [push] = service.received
    assert push.payload["reason"] == "question" and push.payload["count"] == 2
    assert service.refused == []


async def test_a_subscription_made_for_another_key_is_refused(service: PushService) -> None:
    vapid = VapidKey.generate()
    browser = service.subscribe(VapidKey.generate().public_key)
    keys = browser.to_json()["keys"]
    async with aiohttp.ClientSession() as session:
        sent = await send_push(
            session,
            endpoint=browser.endpoint,
            p256dh=keys["p256dh"],
            auth=keys["auth"],
            notice=notice_for("ab" * 32, "box", "plan", 1),
            vapid=vapid,
            now=time.time(),
        )
    assert (sent.outcome, sent.status) == (Outcome.FAILED, 403)
    assert service.received == []


async def answering(status: int, *, hang: bool = False) -> tuple[web.AppRunner, str, list[str]]:
    hits: list[str] = []

    async def push(request: web.Request) -> web.Response:
        hits.append(request.path)
        if hang:
            await asyncio.sleep(3)
        if status in (301, 302, 307, 308):
            return web.Response(status=status, headers={"Location": "/elsewhere"})
        return web.Response(status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", push)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/push/x", hits


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, Outcome.DELIVERED),
        (404, Outcome.GONE),
        (410, Outcome.GONE),
        (429, Outcome.FAILED),
        (500, Outcome.FAILED),
        (307, Outcome.FAILED),
    ],
)
async def test_each_answer_means_what_rfc_8030_says(status: int, outcome: Outcome) -> None:
    runner, endpoint, hits = await answering(status)
    browser = PushService().subscribe(None)  # keys only; the server above is the endpoint
    keys = browser.to_json()["keys"]
    try:
        async with aiohttp.ClientSession() as session:
            sent = await send_push(
                session,
                endpoint=endpoint,
                p256dh=keys["p256dh"],
                auth=keys["auth"],
                notice=notice_for("ab" * 32, "box", "approval", 1),
                vapid=VapidKey.generate(),
                now=time.time(),
            )
    finally:
        await runner.cleanup()
    assert (sent.outcome, sent.status) == (outcome, status)
    assert hits == ["/push/x"]  # a redirect is not followed


async def test_a_push_service_that_does_not_answer_is_given_up_on() -> None:
    runner, endpoint, _ = await answering(201, hang=True)
    keys = PushService().subscribe(None).to_json()["keys"]
    try:
        # The service never answers: only send_push's own timeout ends the call (this guard
        # fails the test, instead of hanging it, if that timeout is not applied).
        async with aiohttp.ClientSession() as session, asyncio.timeout(10):
            sent = await send_push(
                session,
                endpoint=endpoint,
                p256dh=keys["p256dh"],
                auth=keys["auth"],
                notice=notice_for("ab" * 32, "box", "approval", 1),
                vapid=VapidKey.generate(),
                now=time.time(),
                timeout=0.3,
            )
    finally:
        await runner.cleanup()
    assert sent.outcome is Outcome.FAILED and "no answer" in sent.detail


def test_the_origin_is_all_that_names_an_endpoint() -> None:
    assert endpoint_origin("https://fcm.googleapis.com/fcm/send/abc:def") == (
        "https://fcm.googleapis.com"
    )
    assert endpoint_origin("https://push.example:443/x") == "https://push.example"
    assert endpoint_origin("https://push.example:8443/x") == "https://push.example:8443"
    assert endpoint_origin("http://[::1]:9000/push/1") == "http://[::1]:9000"
