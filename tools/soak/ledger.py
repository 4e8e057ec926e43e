"""What the receivers saw, kept as it happens, and the checks that can only be made then.

A delivery is known by its ``webhook-id`` and its path: a task's id on the task's own
path, or an event's id on each endpoint's path. Per delivery the ledger keeps how many
requests came, the times of the 2xx answers and the last status; per ordering key the
highest sequence number seen and the requests of that key in flight (from their arrival to
their answer, or their connection's end); per limited queue how many requests are in
flight. Breaches of ordering (out of order, or two of a key in flight at once: an
"overlap"), of max_concurrency and of a delay are recorded as they happen, with the time,
so that the books can tell those a fault explains from the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Delivery:
    requests: int = 0
    successes: list[float] = field(default_factory=list)  # when each 2xx went out
    last_status: int | None = None


@dataclass(frozen=True, slots=True, eq=False)
class KeyedRequest:
    """A request of an ordering key the receiver has not answered yet (eq=False: each is
    itself, even a repeat of the same delivery arriving at the same instant)."""

    key: str
    seq: int
    webhook_id: str
    arrived: float


@dataclass(frozen=True, slots=True)
class Breach:
    at: float
    kind: str  # "order", "overlap", "concurrency", "early", "webhook-id"
    detail: str


class Ledger:
    def __init__(self) -> None:
        self.deliveries: dict[tuple[str, str], Delivery] = {}
        self.breaches: list[Breach] = []
        self.sent_at: dict[int, float] = {}  # serial → just before its enqueue (time.time())
        self.latencies: list[float] = []  # enqueue sent → first request, since the last sample
        self.first_successes = 0  # deliveries answered 2xx for the first time, since the last sample
        self.requests = 0  # every request, since the last sample
        self._key_high: dict[str, int] = {}
        self._key_in_flight: dict[str, list[KeyedRequest]] = {}
        self.keyed_requests = 0  # requests of ordering keys, each checked against the key's in flight
        self.max_key_in_flight = 0  # the most requests of one key ever in flight at once
        self._in_flight: dict[str, int] = {}
        self.max_in_flight: dict[str, int] = {}
        self._serial_ids: dict[int, str] = {}

    def arrived(self, webhook_id: str, path: str, serial: int | None, now: float) -> Delivery:
        self.requests += 1
        delivery = self.deliveries.get((webhook_id, path))
        if delivery is None:
            delivery = self.deliveries[(webhook_id, path)] = Delivery()
        delivery.requests += 1
        if serial is not None:
            seen = self._serial_ids.setdefault(serial, webhook_id)
            if seen != webhook_id:
                self.breaches.append(
                    Breach(now, "webhook-id", f"serial {serial} came as {seen} and as {webhook_id}")
                )
        return delivery

    def first_arrival(self, delivery: Delivery, serial: int, now: float) -> None:
        """The enqueue→delivery latency of a task meant to go out at once, on its first request."""
        if delivery.requests == 1 and (sent := self.sent_at.get(serial)) is not None:
            self.latencies.append(now - sent)

    def answered(self, delivery: Delivery, status: int, now: float) -> None:
        delivery.last_status = status
        if 200 <= status < 300:
            if not delivery.successes:
                self.first_successes += 1
            delivery.successes.append(now)

    def ordered_start(self, key: str, seq: int, webhook_id: str, now: float) -> KeyedRequest:
        """An ordering key's tasks go one at a time, in the order they were enqueued: a request
        that arrives while another of its key is in flight overlaps it (one breach per request
        it overlaps), one with a lower seq than the highest seen is out of order. Hand what it
        returns to ``ordered_end`` once the request is answered or its connection gone."""
        self.keyed_requests += 1
        in_flight = self._key_in_flight.setdefault(key, [])
        for other in in_flight:
            self.breaches.append(
                Breach(
                    now,
                    "overlap",
                    f"key {key}: seq {seq} ({webhook_id}) arrived while seq {other.seq} "
                    f"({other.webhook_id}) was in flight, for {now - other.arrived:.3f}s",
                )
            )
        high = self._key_high.get(key, -1)
        if seq < high:
            self.breaches.append(Breach(now, "order", f"key {key}: seq {seq} after seq {high}"))
        self._key_high[key] = max(high, seq)
        request = KeyedRequest(key, seq, webhook_id, now)
        in_flight.append(request)
        self.max_key_in_flight = max(self.max_key_in_flight, len(in_flight))
        return request

    def in_flight_of(self, key: str) -> int:
        return len(self._key_in_flight.get(key, ()))

    def ordered_end(self, request: KeyedRequest) -> None:
        in_flight = self._key_in_flight[request.key]
        in_flight.remove(request)
        if not in_flight:
            del self._key_in_flight[request.key]

    def limited_start(self, queue: str, limit: int, now: float) -> None:
        in_flight = self._in_flight.get(queue, 0) + 1
        self._in_flight[queue] = in_flight
        self.max_in_flight[queue] = max(self.max_in_flight.get(queue, 0), in_flight)
        if in_flight > limit:
            self.breaches.append(Breach(now, "concurrency", f"{queue}: {in_flight} in flight, limit {limit}"))

    def limited_end(self, queue: str) -> None:
        self._in_flight[queue] -= 1

    def early(self, webhook_id: str, early_by: float, now: float) -> None:
        self.breaches.append(Breach(now, "early", f"{webhook_id} came {early_by:.3f}s before its delay"))

    def take_window(self) -> tuple[int, int, list[float]]:
        """The requests, first successes and latencies since the last call (the monitor's sample)."""
        window = (self.requests, self.first_successes, self.latencies)
        self.requests, self.first_successes, self.latencies = 0, 0, []
        return window
