"""The soak's books (tools/soak/books.py) and the ledger behind them, as pure logic: each
kind of violation is caught, and only the excuses the books name are accepted."""

from __future__ import annotations

from tools.soak.books import balance
from tools.soak.database import TaskRow
from tools.soak.faults import SLACK, STALL_DUPLICATES, Fault, plan
from tools.soak.ledger import Ledger
from tools.soak.workload import Accepted, Expected, subscribers

T0 = 1_000_000.0


def task(serial: int, kind: str = "ok") -> Accepted:
    return Accepted(serial, kind, T0, [Expected(f"task_{serial}", f"/{kind}/{serial}", f"task_{serial}")])


def answer(ledger: Ledger, item: Accepted, *statuses: int, at: float = T0 + 1) -> None:
    expected = item.deliveries[0]
    for status in statuses:
        delivery = ledger.arrived(expected.webhook_id, expected.path, item.serial, at)
        ledger.answered(delivery, status, at)


def row(status: str, attempts: int = 1, error: str | None = None) -> TaskRow:
    return TaskRow(status, attempts, error)


def test_a_task_gone_from_the_database_is_pruned_only_if_the_receiver_took_it() -> None:
    ledger = Ledger()
    delivered, never = task(1), task(2)
    answer(ledger, delivered, 500, 204)
    answer(ledger, never, 500)
    books = balance([delivered, never], {}, ledger, [])
    assert books.by_state["pruned"] == 2
    assert len(books.lost) == 1 and "serial 2" in books.lost[0]
    assert books.violations == 1


def test_states_are_checked_against_the_receiver() -> None:
    ledger = Ledger()
    ok, claimed, gone, gone_taken, flaky, waiting = (
        task(1), task(2), task(3, "gone"), task(4, "gone"), task(5, "flaky"), task(6),
    )  # fmt: skip
    answer(ledger, ok, 204)
    answer(ledger, gone, 410)
    answer(ledger, gone_taken, 204)
    answer(ledger, flaky, 500, 500)
    rows = {
        "task_1": row("succeeded"), "task_2": row("succeeded"), "task_3": row("failed"),
        "task_4": row("failed"), "task_5": row("failed", 8, "HTTP 500"), "task_6": row("ready", 0),
    }  # fmt: skip
    books = balance([ok, claimed, gone, gone_taken, flaky, waiting], rows, ledger, [])
    assert [d.split(":")[0] for d in books.disagreements] == [
        "ok serial 2 task task_2 /ok/2",  # succeeded, never answered 2xx
        "gone serial 4 task task_4 /gone/4",  # failed, but answered 2xx
    ]
    assert len(books.unexpected_failures) == 1 and "HTTP 500" in books.unexpected_failures[0]
    assert len(books.unfinished) == 1 and "still ready" in books.unfinished[0]
    assert books.by_state == {"succeeded": 2, "failed": 3, "ready": 1}
    assert books.violations == 4


def test_a_duplicate_is_excused_only_when_its_first_2xx_fell_in_a_faults_window() -> None:
    ledger = Ledger()
    near, far = task(1), task(2)
    answer(ledger, near, 204, at=T0 + 100)
    answer(ledger, near, 204, at=T0 + 130)
    answer(ledger, far, 204, at=T0 + 200)
    answer(ledger, far, 204, at=T0 + 230)
    kill = Fault("kill", 0, "workly-0", began=T0 + 101, ended=T0 + 104)
    books = balance([near, far], {}, ledger, [kill])
    assert books.duplicates == 2 and books.excused_duplicates == 1
    assert len(books.unexcused_duplicates) == 1 and "serial 2" in books.unexcused_duplicates[0]


def test_a_fault_covers_its_window_and_a_few_seconds_either_side() -> None:
    fault = Fault("pause", 0, began=T0, ended=T0 + 16)
    assert fault.covers(T0 - SLACK) and fault.covers(T0 + 16 + SLACK)
    assert not fault.covers(T0 - SLACK - 0.1) and not fault.covers(T0 + 16 + SLACK + 0.1)
    assert not Fault("kill", 0).covers(T0)  # never began


def keyed(ledger: Ledger, key: str, seq: int, arrived: float, *, held: bool = False) -> None:
    """A request of ``key`` arriving at the receiver, answered before the next (unless ``held``)."""
    request = ledger.ordered_start(key, seq, f"task_{key}_{seq}", arrived)
    if not held:
        ledger.ordered_end(request)


def test_two_requests_of_a_key_in_flight_at_once_are_an_overlap_and_one_after_another_are_not() -> None:
    ledger = Ledger()
    first = ledger.ordered_start("k1", 0, "task_a", T0)
    ledger.ordered_end(first)  # answered before the next arrives: no overlap
    second = ledger.ordered_start("k1", 1, "task_b", T0 + 1)
    other_key = ledger.ordered_start("k2", 0, "task_c", T0 + 1.1)  # another key: no overlap
    assert ledger.breaches == []
    late = ledger.ordered_start("k1", 0, "task_a", T0 + 1.25)  # while seq 1 is held: both breaches
    assert [(b.kind, b.detail) for b in ledger.breaches] == [
        ("overlap", "key k1: seq 0 (task_a) arrived while seq 1 (task_b) was in flight, for 0.250s"),
        ("order", "key k1: seq 0 after seq 1"),
    ]
    for request in (second, late, other_key):
        ledger.ordered_end(request)
    again = ledger.ordered_start("k1", 2, "task_d", T0 + 2)  # the key is free again
    ledger.ordered_end(again)
    assert len(ledger.breaches) == 2
    assert (ledger.keyed_requests, ledger.max_key_in_flight) == (5, 2)


def test_an_overlap_is_never_excused_by_a_pause_but_an_order_breach_still_is() -> None:
    ledger = Ledger()
    held = ledger.ordered_start("k1", 1, "task_b", T0 + 19)
    ledger.ordered_start("k1", 0, "task_a", T0 + 20)  # just after the pause ended: overlap and order
    ledger.ordered_end(held)
    keyed(ledger, "k2", 1, T0 + 20)
    keyed(ledger, "k2", 0, T0 + 21)  # order alone, just after the pause
    assert [b.kind for b in ledger.breaches] == ["overlap", "order", "order"]
    pause = Fault("pause", 0, began=T0 + 3, ended=T0 + 19)
    books = balance([], {}, ledger, [pause])
    assert books.excused_breaches == {"order": 2}
    assert len(books.unexcused_breaches) == 1 and books.unexcused_breaches[0].startswith("overlap")
    assert books.violations == 1
    assert (books.keyed_requests, books.max_key_in_flight) == (4, 2)


def test_concurrency_delay_and_webhook_id_breaches() -> None:
    ledger = Ledger()
    for _ in range(3):
        ledger.limited_start("q", 2, T0)
    ledger.limited_end("q")
    ledger.limited_start("q", 2, T0)  # 3 again, not a new peak
    assert ledger.max_in_flight == {"q": 3}
    ledger.early("task_9", 0.25, T0)
    ledger.arrived("task_1", "/ok/7", 7, T0)
    ledger.arrived("task_2", "/ok/7", 7, T0)  # serial 7 under another webhook-id
    kinds = [b.kind for b in ledger.breaches]
    assert kinds == ["concurrency", "concurrency", "early", "webhook-id"]
    # Right after a paused process continued, only the concurrency excess is excused.
    pause = Fault("pause", 0, began=T0 - 20, ended=T0 - 1)
    books = balance([], {}, ledger, [pause])
    assert books.excused_breaches == {"concurrency": 2}
    assert [b.split()[0] for b in books.unexcused_breaches] == ["early", "webhook-id"]
    assert len(balance([], {}, ledger, []).unexcused_breaches) == 4


def test_the_window_reports_what_came_since_the_last_sample() -> None:
    ledger = Ledger()
    ledger.sent_at[1] = T0
    delivery = ledger.arrived("task_1", "/ok/1", 1, T0 + 0.005)
    ledger.first_arrival(delivery, 1, T0 + 0.005)
    ledger.answered(delivery, 204, T0 + 0.005)
    again = ledger.arrived("task_1", "/ok/1", 1, T0 + 1)
    ledger.first_arrival(again, 1, T0 + 1)  # not a first arrival: no latency
    ledger.answered(again, 204, T0 + 1)  # a second 2xx is not a new first success
    requests, first_successes, latencies = ledger.take_window()
    assert (requests, first_successes) == (2, 1)
    assert len(latencies) == 1 and abs(latencies[0] - 0.005) < 1e-6
    assert ledger.take_window() == (0, 0, [])


def test_the_plan_takes_turns_and_leaves_the_last_fifth_quiet() -> None:
    faults = plan(600, 120, ["kill", "pause", "database"], outage=90)
    assert [(f.at, f.kind) for f in faults] == [
        (60, "kill"),
        (150, "outage"),
        (180, "pause"),
        (300, "database"),
        (420, "kill"),
    ]
    assert plan(60, 15, [], outage=0) == []


def test_a_refused_send_and_a_fault_that_failed_are_violations() -> None:
    broken = Fault("kill", 0, "workly-1", began=T0, ended=T0 + 60, error="RuntimeError: not ready after 60s")
    books = balance(
        [],
        {},
        Ledger(),
        [broken],
        refused=["ok serial 3: POST /v1/queues/q/tasks: HTTP 422"],
        soak_errors=["x"],
    )
    assert books.violations == 3
    assert books.failed_faults == ["kill workly-1: RuntimeError: not ready after 60s"]
    assert books.as_json()["refused"] == {
        "count": 1,
        "first": ["ok serial 3: POST /v1/queues/q/tasks: HTTP 422"],
    }


def test_a_receiver_outage_excuses_no_duplicate() -> None:
    ledger = Ledger()
    item = task(1, "outage")
    answer(ledger, item, 204, at=T0 + 10)
    answer(ledger, item, 204, at=T0 + 20)
    outage = Fault("outage", 0, "outage receiver", began=T0, ended=T0 + 180)
    books = balance([item], {}, ledger, [outage])
    assert books.duplicates == 1 and books.excused_duplicates == 0 and len(books.unexcused_duplicates) == 1


def test_events_must_reach_exactly_the_endpoints_they_match() -> None:
    assert subscribers("order.created", None) == {"/ep/orders", "/ep/all", "/ep/flaky"}
    assert subscribers("invoice.paid", None) == {"/ep/all", "/ep/flaky"}
    assert subscribers("user.signup", None) == {"/ep/all"}
    assert subscribers("order.created", "acme") == {"/ep/acme"}  # a tenant's event: its endpoints only
    assert subscribers("orders.created", None) == {"/ep/all"}  # order.* is a prefix up to the dot
    missed = Accepted(5, "event", T0, [], "order.created (tenant None) went to [], not ['/ep/all']")
    books = balance([missed], {}, Ledger(), [], never_acknowledged=2)
    assert books.fan_out == ["event serial 5: order.created (tenant None) went to [], not ['/ep/all']"]
    assert books.violations == 3  # the fan-out and the two sends never acknowledged


def test_a_stall_long_enough_excuses_duplicates_counted_apart_from_the_faults() -> None:
    ledger = Ledger()
    long, short, alone, clock, late = task(1), task(2), task(3), task(4), task(5)
    for item, at in ((long, T0 + 10), (short, T0 + 100), (alone, T0 + 200), (clock, T0 + 300),
                     (late, T0 + 420)):  # fmt: skip
        answer(ledger, item, 204, 204, at=at)
    soak, clock_jump = STALL_DUPLICATES["soak"], STALL_DUPLICATES["clock"]
    stalls = [
        Fault("stall", 0, "soak", began=T0 + 8, ended=T0 + 8 + soak),  # excuses serial 1
        Fault("stall", 0, "soak", began=T0 + 98, ended=T0 + 98 + soak - 0.5),  # too short
        Fault("stall", 0, "watch", began=T0 + 190, ended=T0 + 190 + 60),  # the watch alone
        Fault("stall", 0, "clock", began=T0 + 295, ended=T0 + 295 + clock_jump),  # serial 4
        Fault("stall", 0, "soak", began=T0 + 400, ended=T0 + 400 + soak),  # 420: past its slack
    ]
    books = balance([long, short, alone, clock, late], {}, ledger, [], stalls=stalls)
    assert books.duplicates == 5 and books.excused_by_stall == 2 and books.excused_duplicates == 0
    assert [d.split(" task")[0] for d in books.unexcused_duplicates] == [
        "ok serial 2",
        "ok serial 3",
        "ok serial 5",
    ]


def test_order_and_overlap_breaches_are_excused_after_a_clock_jump() -> None:
    ledger = Ledger()
    jump = Fault("stall", 0, "clock", began=T0, ended=T0 + 20)
    soak = Fault("stall", 0, "soak", began=T0 + 100, ended=T0 + 120)
    keyed(ledger, "k", 2, T0 + 21)
    keyed(ledger, "k", 1, T0 + 22)  # out of order, just after the jump
    keyed(ledger, "k", 3, T0 + 121)
    keyed(ledger, "k", 2, T0 + 122)  # after a soak stall: no lease lost, no excuse
    keyed(ledger, "j", 0, T0 + 23, held=True)
    keyed(ledger, "j", 1, T0 + 23.1)  # overlap just after the jump: excused like the order breach
    books = balance([], {}, ledger, [], stalls=[jump, soak])
    assert books.excused_breaches == {"order": 1, "overlap": 1} and len(books.unexcused_breaches) == 1
