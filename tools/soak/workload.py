"""What the soak sends, and the record of what Workly accepted.

Every request carries an idempotency key made from its serial number, so the load can send
it again after a connection error or a 5xx (a killed process, a restarting database)
without making a second task: an enqueue counts as accepted only once a 200 or 201 came
back, and the books then hold Workly to it. The tasks of an ordering key are sent one at a
time (the next only after the previous was accepted): otherwise a retried request could
overtake a later one and the receiver would see an order the client, not Workly, made.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

from tools.soak.fleet import TOKEN
from tools.soak.ledger import Ledger
from workly.dispatch.http import HttpClient, HttpError
from workly.loadtest.run import ANYWHERE

# Per 1,000 sends. "event" publishes to the endpoints; the rest enqueue one task each.
MIX: dict[str, int] = {
    "ok": 310, "rough": 120, "flaky": 40, "gone": 10, "fail": 10, "delay": 50, "stall": 10, "reset": 10,
    "throttle": 20, "outage": 30, "key": 120, "limited": 20, "event": 250,
}  # fmt: skip
FAILS = frozenset({"gone", "fail"})  # the kinds that must end failed; every other must succeed
# The rough origin's receiver answers most requests at once: it is a live receiver with
# bad moments, not a failing one (a breaker would rightly hold an origin where every first
# request fails, and its probes, all first requests, would keep it open).
ROUGH = frozenset({"rough", "stall", "reset", "throttle"})
KEYS = 50
TENANTS = 8
TIMEOUT = 5.0  # seconds per attempt on every soak queue and endpoint
LEASE_MARGIN = 6.0  # WORKLY_LEASE_MARGIN of every process: a lease is TIMEOUT + LEASE_MARGIN

_DELIVERY = {"max_attempts": 8, "min_backoff": 0.2, "max_backoff": 2, "timeout": TIMEOUT}
QUEUES: dict[str, dict[str, Any]] = {
    "soak-plain": {**_DELIVERY, "max_concurrency": 500},
    # The outage lasts minutes; held tasks spend no attempts, but each failed probe spends one.
    "soak-outage": {**_DELIVERY, "max_concurrency": 100, "max_attempts": 100, "max_backoff": 5},
    "soak-keyed": {**_DELIVERY, "max_concurrency": 100, "ordering": "key"},
    "soak-limited": {**_DELIVERY, "max_concurrency": 4},
}
# The queues whose deliveries in flight the receiver counts against their max_concurrency.
LIMITS: dict[str, int] = {"soak-limited": QUEUES["soak-limited"]["max_concurrency"]}
# name → (event_types, tenant)
ENDPOINTS: dict[str, tuple[list[str] | None, str | None]] = {
    "orders": (["order.*"], None),
    "all": (None, None),
    "flaky": (["invoice.paid", "order.created"], None),
    "acme": (None, "acme"),
}
EVENT_TYPES = (("order.created", 5), ("invoice.paid", 3), ("user.signup", 2))


@dataclass(frozen=True, slots=True)
class Expected:
    """One delivery Workly accepted: its task, the path it goes to, its webhook-id."""

    task_id: str
    path: str
    webhook_id: str


@dataclass(slots=True)
class Accepted:
    serial: int
    kind: str
    sent_at: float
    deliveries: list[Expected]
    fan_out_error: str | None = None  # an event not delivered to exactly the endpoints it matches


def subscribers(event_type: str, tenant: str | None) -> set[str]:
    """The soak's endpoints an event reaches, by Workly's rules (docs/webhooks.md): its
    types (exact, or a prefix pattern like order.*; none: every type) and its tenant (an
    endpoint of a tenant gets only that tenant's events; one of none only untenanted ones)."""
    reached = set()
    for name, (types, endpoint_tenant) in ENDPOINTS.items():
        if endpoint_tenant != tenant:
            continue
        if types is None or any(
            event_type == pattern or (pattern.endswith(".*") and event_type.startswith(pattern[:-1]))
            for pattern in types
        ):
            reached.add(f"/ep/{name}")
    return reached


@dataclass
class Targets:
    good: str
    rough: str
    outage: str


class SendFailed(Exception):
    """Worth sending again: no answer, or a 5xx."""


class Refused(Exception):
    """A 4xx: Workly refused what the soak sent, which it never should."""


@dataclass
class Workload:
    targets: Targets
    ledger: Ledger
    seed: int = 1
    accepted: list[Accepted] = field(default_factory=list)
    given_up: int = 0  # sends never acknowledged after every retry
    refused: list[str] = field(default_factory=list)  # 4xx answers: a violation
    errors: list[str] = field(default_factory=list)  # the soak's own failures: the run is void
    retried: int = 0  # sends that needed more than one request
    endpoint_paths: dict[str, str] = field(default_factory=dict)  # endpoint id → its path
    bases: list[str] = field(default_factory=list)  # the live processes' base URLs

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)
        kinds, weights = zip(*MIX.items(), strict=True)
        self._kinds: tuple[str, ...] = kinds
        self._weights: tuple[int, ...] = weights
        self._key_seq: dict[str, int] = {}
        self._key_locks: dict[str, asyncio.Lock] = {}
        self._turn = 0
        self.authorization = f"Bearer {TOKEN}"
        self._headers = {"content-type": "application/json", "authorization": self.authorization}
        # Batch answers run to hundreds of KiB: keep whole bodies.
        self.client = HttpClient(max_body=16 << 20, policy=ANYWHERE, max_idle_per_origin=256, max_idle=512)

    # -- setting up -----------------------------------------------------------------
    async def set_up(self) -> None:
        for name, config in QUEUES.items():
            await self._call("PUT", f"/v1/queues/{name}", config, {200, 201})
        for name, (types, tenant) in ENDPOINTS.items():
            created = await self._call(
                "POST",
                "/v1/endpoints",
                {"url": f"{self.targets.good}/ep/{name}", "event_types": types, "tenant": tenant,
                 **_DELIVERY, "max_concurrency": 100},
                {201},
            )  # fmt: skip
            self.endpoint_paths[created["id"]] = f"/ep/{name}"

    # -- sending --------------------------------------------------------------------
    def next_kind(self) -> str:
        return self._random.choices(self._kinds, self._weights)[0]

    async def send(self, serial: int, kind: str) -> None:
        """Send task ``serial`` of ``kind`` until accepted (or give up after ~30 s)."""
        try:
            await self._send(serial, kind)
        except Refused as exc:
            self.refused.append(f"{kind} serial {serial}: {exc}")
        except Exception as exc:  # the soak's own failure: reported, and the run fails
            self.errors.append(f"{kind} serial {serial}: {type(exc).__name__}: {exc}")

    async def _send(self, serial: int, kind: str) -> None:
        if kind == "key":
            key = f"k{serial % KEYS}"
            lock = self._key_locks.setdefault(key, asyncio.Lock())
            async with lock:
                seq = self._key_seq.get(key, 0)
                self._key_seq[key] = seq + 1
                await self._send_task(serial, kind, "soak-keyed", f"/key/{key}/{seq}/{serial}", {"key": key})
        elif kind == "event":
            await self._publish(serial)
        else:
            await self._send_plain(serial, kind)

    async def _send_plain(self, serial: int, kind: str) -> None:
        origin = {"outage": self.targets.outage, **dict.fromkeys(ROUGH, self.targets.rough)}
        base = origin.get(kind, self.targets.good)
        extra: dict[str, Any] = {"tenant": f"t{serial % TENANTS}"}
        queue = "soak-plain"
        path = f"/{kind}/{serial}"
        if kind == "delay":
            delay = self._random.uniform(0.5, 15)
            extra["delay"] = round(delay, 3)
            # Due no earlier than this: the server's "now" comes after the request was sent.
            path = f"/delay/{serial}/{int((time.time() + round(delay, 3)) * 1000)}"
        elif kind == "fail":
            extra["max_attempts"] = 3
        elif kind == "outage":
            queue = "soak-outage"
        elif kind == "limited":
            queue, extra = "soak-limited", {}
        await self._send_task(serial, kind, queue, path, extra, base)

    async def _send_task(
        self, serial: int, kind: str, queue: str, path: str, extra: dict[str, Any], base: str | None = None
    ) -> None:
        body = {"url": f"{base or self.targets.good}{path}", "body": {"serial": serial}, **extra,
                "idempotency_key": f"soak-{serial}"}  # fmt: skip
        sent_at = time.time()
        self.ledger.sent_at[serial] = sent_at
        task = await self._with_retries("POST", f"/v1/queues/{queue}/tasks", body, {200, 201})
        if task is not None:
            self.accepted.append(Accepted(serial, kind, sent_at, [Expected(task["id"], path, task["id"])]))

    async def _publish(self, serial: int) -> None:
        types, weights = zip(*EVENT_TYPES, strict=True)
        event_type = self._random.choices(types, weights)[0]
        tenant = "acme" if serial % 5 == 0 else None
        body = {"type": event_type, "payload": {"serial": serial}, "tenant": tenant,
                "idempotency_key": f"soak-{serial}"}  # fmt: skip
        sent_at = time.time()
        self.ledger.sent_at[serial] = sent_at
        event = await self._with_retries("POST", "/v1/events", body, {200, 201})
        if event is not None:
            expected = [
                Expected(d["task_id"], self.endpoint_paths.get(d["endpoint_id"], "?"), event["id"])
                for d in event["deliveries"]
            ]
            paths = sorted(e.path for e in expected)
            wanted = sorted(subscribers(event_type, tenant))
            error = (
                None if paths == wanted else f"{event_type} (tenant {tenant}) went to {paths}, not {wanted}"
            )
            self.accepted.append(Accepted(serial, "event", sent_at, expected, error))

    async def burst(self, first_serial: int, count: int) -> None:
        """One batch enqueue of ``count`` plain tasks (the batch API, all in one transaction)."""
        serials = range(first_serial, first_serial + count)
        sent_at = time.time()
        tasks = []
        for serial in serials:
            self.ledger.sent_at[serial] = sent_at
            tasks.append({"url": f"{self.targets.good}/ok/{serial}", "body": {"serial": serial},
                          "idempotency_key": f"soak-{serial}"})  # fmt: skip
        path = "/v1/queues/soak-plain/tasks/batch"
        try:
            answer = await self._with_retries("POST", path, {"tasks": tasks}, {201})
        except Refused as exc:
            self.refused.append(f"burst from serial {first_serial}: {exc}")
            return
        if answer is None:
            return
        for serial, task in zip(serials, answer["tasks"], strict=True):
            path = f"/ok/{serial}"
            self.accepted.append(Accepted(serial, "burst", sent_at, [Expected(task["id"], path, task["id"])]))

    async def _with_retries(self, method: str, path: str, body: Any, ok: set[int]) -> Any:
        """The answer's JSON once a status in ``ok`` came, trying the next live process after a
        connection error, a timeout or a 5xx; None when ~30 s of tries were all refused."""
        payload = json.dumps(body).encode()
        deadline = time.monotonic() + 30
        tries = 0
        while True:
            tries += 1
            try:
                return await self._request(method, path, payload, ok)
            except SendFailed:
                if time.monotonic() > deadline:
                    self.given_up += 1
                    return None
                if tries == 2:
                    self.retried += 1
                await asyncio.sleep(min(0.1 * tries, 1.0))

    async def _request(self, method: str, path: str, payload: bytes, ok: set[int]) -> Any:
        if not self.bases:
            raise SendFailed("no live process")
        self._turn += 1
        base = self.bases[self._turn % len(self.bases)]
        try:
            response = await self.client.request(method, f"{base}{path}", self._headers, payload, timeout=10)
        except (HttpError, TimeoutError) as exc:
            raise SendFailed(str(exc)) from None
        if response.status in ok:
            if not response.complete:  # the process died between the answer's head and body
                raise SendFailed(f"HTTP {response.status} with its body cut short")
            return json.loads(response.body)
        if response.status >= 500:
            raise SendFailed(f"HTTP {response.status}")
        raise Refused(f"{method} {path}: HTTP {response.status}: {response.body[:300]!r}")

    async def _call(self, method: str, path: str, body: Any, ok: set[int]) -> Any:
        answer = await self._with_retries(method, path, body, ok)
        if answer is None:
            raise RuntimeError(f"{method} {path}: no process answered")
        return answer
