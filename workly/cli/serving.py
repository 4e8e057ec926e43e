"""Serving the app: uvicorn in this process (`workly dev`, `workly serve`), or in worker
processes under a supervisor (`workly serve --workers N`); and what SIGINT and SIGTERM do.

A stop. The first SIGINT (Ctrl-C) or SIGTERM stops taking requests, lets those in progress
finish (for up to HTTP_DRAIN_SECONDS), then stops the service, which gives the deliveries in
flight WORKLY_SHUTDOWN_GRACE. A SIGINT after that, however soon (a second Ctrl-C), stops the
service at once: the deliveries still in flight come back through the reaper. A SIGTERM after
the first signal is the same stop: process managers send SIGTERM, and systemd (KillMode
control-group, its default) sends it to every process of a service at once, so a worker may
get it twice, from systemd and from its supervisor, for one stop.

One Ctrl-C, one signal. A terminal's Ctrl-C signals its whole foreground process group. The
workers run in sessions of their own, so that group holds the supervisor alone, and the
supervisor passes each SIGINT and SIGTERM it gets on to every worker, once: a worker hears a
Ctrl-C exactly once, however late a loaded supervisor gets to it. (Were the workers in the
terminal's group, they would hear each Ctrl-C twice, and could not tell a second Ctrl-C
from the first one passed on late.) A worker leaves the group as the first thing it runs; a
Ctrl-C while its interpreter is still starting reaches it as well, and waits, blocked, until
its server can handle it, before the app starts: it then starts nothing (WorklyServer.startup).

The supervisor's death. Each worker holds the read end of a pipe whose write end only the
supervisor holds: when the supervisor dies, however (kill -9 included), the pipe closes, and
each worker stops as on SIGTERM. Out of the terminal's session, nothing else would stop them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from workly import logs
from workly.app import create_app, http_protocol
from workly.config import Settings
from workly.service import Service

if TYPE_CHECKING:
    from starlette.types import ASGIApp

log = logging.getLogger("workly.serve")

# How long a stop waits for the HTTP requests in progress (a client that never finishes its
# request would hold it forever) before the service's own stop and its delivery grace.
HTTP_DRAIN_SECONDS = 5
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})
# A worker's exit status when its app did not start (uvicorn's own, for a failed lifespan
# startup): the next worker would fail the same way, so the supervisor stops instead.
WORKER_DID_NOT_START = 3
# uvicorn's supervisor spawns its workers too: a fresh interpreter, nothing forked mid-flight.
_SPAWN = multiprocessing.get_context("spawn")


class WorklyServer(uvicorn.Server):
    """uvicorn's server, with the stop described above: uvicorn's own answer to a second
    Ctrl-C (its forced exit) would skip the application's shutdown, leaving the results of the
    last deliveries unrecorded and nothing closed."""

    def __init__(self, config: uvicorn.Config, service: Service) -> None:
        super().__init__(config)
        self._service = service
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            # A worker starts with SIGINT and SIGTERM blocked (_start_worker): they have their
            # handler now, and one that came meanwhile is handled here, not lost.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if self.should_exit:
            # Asked to stop before the app has started (a signal while this process started):
            # there is nothing to stop, and starting the service would only claim tasks for a
            # stop to wait for, or for a second signal (a worker that was still starting may
            # have heard the terminal too) to abandon to the reaper.
            return
        await super().startup(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # The handlers are installed for the whole of serve(), before the app starts: a signal
        # that comes while it starts is the first or the second like any other.
        if not self.should_exit:
            super().handle_exit(sig, frame)  # stop serving; the app's lifespan stops the service
        elif self._loop is not None:
            # A signal handler runs between any two bytecodes, the event loop's included: what
            # it does is done from the loop.
            if sig == signal.SIGINT:
                self._loop.call_soon_threadsafe(self._stop_now)
            else:
                name = signal.Signals(sig).name
                self._loop.call_soon_threadsafe(log.info, "%s while stopping: the same stop", name)

    def _stop_now(self) -> None:
        log.info("Ctrl-C again: stopping now, without waiting for the deliveries in flight")
        self._service.stop_now()


def serve_app(app: ASGIApp, service: Service, sock: socket.socket, settings: Settings) -> None:
    """Serve ``app`` (which serves ``service``) on the bound socket, in this process."""
    WorklyServer(_config(app, settings), service).run(sockets=[sock])


def _config(app: ASGIApp, settings: Settings) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        http=http_protocol(settings),  # deadlines and bounds: web/http_protocol.py
        log_level=settings.log_level,
        access_log=False,
        log_config=None,  # uvicorn's loggers propagate to Workly's handler (text or JSON)
        timeout_graceful_shutdown=HTTP_DRAIN_SECONDS,
    )


def supervise(sock: socket.socket, workers: int) -> int:
    """Run ``workers`` worker processes serving ``sock`` (each builds its app from the
    WORKLY_* variables), pass them every SIGINT and SIGTERM, replace one that ends before a
    stop, and return once a stop has ended them all: 0, or WORKER_DID_NOT_START."""
    multiprocessing.allow_connection_pickling()  # the socket and the pipe go to each worker
    received: list[int] = []
    wakeup_read, wakeup_write = socket.socketpair()
    wakeup_read.setblocking(False)
    wakeup_write.setblocking(False)
    lifeline, lifeline_end = _SPAWN.Pipe(duplex=False)  # the workers read; only this process writes
    handlers = {sig: signal.signal(sig, lambda signum, _: received.append(signum)) for sig in STOP_SIGNALS}
    # The wake-up descriptor ends the wait below as soon as a signal comes.
    previous_wakeup = signal.set_wakeup_fd(wakeup_write.fileno(), warn_on_full_buffer=False)
    status, stopping = 0, False
    try:
        running = [_start_worker(sock, lifeline) for _ in range(workers)]
        while running:
            wait([wakeup_read, *(worker.sentinel for worker in running)])
            with contextlib.suppress(BlockingIOError):
                wakeup_read.recv(4096)
            while received:  # before the exits: a signal also goes to a worker about to be reaped
                signum = received.pop(0)
                _log_signal(signum, stopping)
                stopping = True
                _signal_all(running, signum)
            for worker in [worker for worker in running if worker.exitcode is not None]:
                running.remove(worker)
                if stopping:
                    continue
                if worker.exitcode == WORKER_DID_NOT_START:
                    log.error("worker process [%s] could not start: stopping", worker.pid)
                    status, stopping = WORKER_DID_NOT_START, True
                    _signal_all(running, signal.SIGTERM)
                else:
                    log.warning("worker process [%s] ended (exit status %s): starting another",
                                worker.pid, worker.exitcode)  # fmt: skip
                    running.append(_start_worker(sock, lifeline))
    finally:
        signal.set_wakeup_fd(previous_wakeup)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        for end in (lifeline, lifeline_end):
            end.close()
        wakeup_read.close()
        wakeup_write.close()
    log.info("all workers stopped")
    return status


def _log_signal(signum: int, stopping: bool) -> None:
    name = signal.Signals(signum).name
    if not stopping:
        log.info("received %s: stopping the workers (a second Ctrl-C stops them at once)", name)
    elif signum == signal.SIGINT:
        log.info("received SIGINT again: the workers stop at once")
    else:
        log.info("received %s: the workers are stopping already", name)


def _signal_all(workers: list[BaseProcess], signum: int) -> None:
    for worker in workers:
        if worker.pid is not None:
            with contextlib.suppress(ProcessLookupError):  # ended, and not reaped yet: a zombie
                os.kill(worker.pid, signum)


def _start_worker(sock: socket.socket, lifeline: Connection) -> BaseProcess:
    worker = _SPAWN.Process(target=_worker, args=(sock, lifeline), name="workly-worker")
    # The worker inherits the blocked signals, and handles them once its server can
    # (WorklyServer.capture_signals): one that comes while it starts waits for that instead of
    # killing it half started. (The supervisor's own wait, meanwhile: they are delivered here
    # as the mask is restored.) multiprocessing starts its resource tracker on the first start
    # the same way, but unblocks both signals after it, in the middle of ours: started first.
    resource_tracker.ensure_running()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        worker.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    log.info("started worker process [%s]", worker.pid)
    return worker


def _worker(sock: socket.socket, lifeline: Connection) -> None:
    """A worker process: the app, from the WORKLY_* variables, on the supervisor's socket."""
    os.setsid()  # first of all: out of the terminal's process group (see the module's docstring)
    threading.Thread(target=_stop_when_orphaned, args=(lifeline,), name="lifeline", daemon=True).start()
    settings = Settings()
    logs.configure(settings.log_level, settings.log_format)
    service = Service(settings)
    server = WorklyServer(_config(create_app(service), settings), service)
    with contextlib.suppress(KeyboardInterrupt):  # a first SIGINT, raised again once all has stopped
        server.run(sockets=[sock])
    if not server.started and not server.should_exit:
        sys.exit(WORKER_DID_NOT_START)


def _stop_when_orphaned(lifeline: Connection) -> None:
    """Nothing is ever written to the lifeline: the read returns (end of file) once the
    supervisor's end has closed, that is once it has died. Then stop as on SIGTERM."""
    with contextlib.suppress(EOFError, OSError):
        lifeline.recv_bytes()
    os.kill(os.getpid(), signal.SIGTERM)
