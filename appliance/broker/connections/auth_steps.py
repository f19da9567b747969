"""One connection's SASL authentication, step by step, and what it lets through.

On a SASL listener a connection may send nothing but ApiVersions, SaslHandshake and
SaslAuthenticate until it has logged in (``security.sasl``: the exchange's state machine
and the mechanisms); it must log in within the auth timeout, or it is closed. ``AuthSteps``
drives that session for the connection: it answers each SASL request (a PLAIN password is
checked in a worker process, ``security.password_pool``, the answer then a Future), starts
and stops the timeout, and says when the connection must close after a failure's answer
(``failed``) or may send anything (``on_login``: the frame cap is lifted and the
principal set). On a listener without SASL every request passes, and a SASL request is
answered ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool

from appliance.broker.security import sasl
from appliance.broker.security.password_pool import PasswordWorkers
from appliance.broker.wire import schemas
from appliance.logs import get_logger

log = get_logger("appliance.broker")


class AuthSteps:
    def __init__(self, session: sasl.SaslSession | None,
                 password_checks: PasswordWorkers | None, timeout_ms: int,
                 on_login: Callable[[str | None], None]) -> None:
        self.session = session  # None: the listener has no SASL
        self.password_checks = password_checks  # a listener offering PLAIN has them
        self.timeout_ms = timeout_ms
        self.on_login = on_login  # the user's name, once authenticated
        self.failed = False  # a failure was answered: close once the answer is sent
        self.peer: object = None  # for the log lines
        self._timer: asyncio.TimerHandle | None = None

    @property
    def waiting(self) -> bool:
        """Not authenticated yet on a SASL listener: only the SASL exchange may proceed."""
        return self.session is not None and not self.session.authenticated

    @property
    def expects_raw_token(self) -> bool:
        """The next frame is a bare token (after SaslHandshake v0), not a Kafka request."""
        return self.session is not None and self.session.expects_raw_token

    def admits(self, api_key: int) -> bool:
        """May a request of ``api_key`` be handled now?"""
        return not self.waiting or api_key in sasl.PRE_AUTH_APIS

    def start_clock(self, peer: object, on_timeout: Callable[[], None]) -> None:
        """The channel is up (TLS, if any, done): SASL must now finish within the timeout;
        ``on_timeout`` runs if it has not."""
        self.peer = peer
        if self.session is None:
            return

        def timed_out() -> None:
            if self.waiting:
                on_timeout()

        self._timer = asyncio.get_running_loop().call_later(self.timeout_ms / 1000.0,
                                                            timed_out)

    def stop_clock(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def step(self, api_key: int, version: int, req: dict) -> dict | asyncio.Future:
        """The answer to a SaslHandshake or SaslAuthenticate request (a Future while a
        PLAIN password is checked)."""
        if self.session is None:
            return sasl.not_on_this_listener(api_key)
        step = self.session.handle(api_key, version, req)
        if isinstance(step, sasl.PasswordCheck):
            return self._check_password(api_key, step)
        return self._after(api_key, step)

    def _check_password(self, api_key: int, check: sasl.PasswordCheck) -> asyncio.Future:
        """The SaslAuthenticate answer, once a worker has checked the password."""
        workers = self.password_checks
        assert workers is not None  # a listener offering PLAIN has them
        answer = asyncio.get_running_loop().create_future()

        def checked(work: asyncio.Future) -> None:
            if answer.cancelled():  # the connection went away meanwhile
                return
            if work.cancelled():  # the broker is stopping
                answer.cancel()
                return
            exc = work.exception()
            if exc is None:
                answer.set_result(self._after(api_key, check.finish(work.result())))
                return
            if isinstance(exc, BrokenProcessPool):  # a worker died: new ones for the next
                workers.replace_broken(generation)
            answer.set_exception(exc)  # this connection closes; its client retries

        generation = workers.generation
        workers.run(check.run).add_done_callback(checked)
        return answer

    def _after(self, api_key: int, result: dict) -> dict:
        session = self.session
        assert session is not None
        if session.state is sasl.State.FAILED:
            self.failed = True
        elif session.authenticated and api_key == schemas.SASL_AUTHENTICATE.key:
            self.stop_clock()
            self.on_login(session.user)
            log.info("broker.authenticated", peer=str(self.peer), user=session.user,
                     mechanism=session.mechanism)
        return result
