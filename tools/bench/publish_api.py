"""Events published per second through the HTTP API, each fanned out to N endpoints.

    python -m tools.bench.publish_api SERVER_URL [endpoints] [seconds] [concurrency] [token]
        [--schema] [--filter]

Run it against a server started with WORKLY_DISPATCH=false: it measures publishing (the
event and its N delivery tasks stored in one transaction), not delivery. It registers
``endpoints`` endpoints subscribed to bench.*, pointing at the discard port 127.0.0.1:9
(nothing is delivered anywhere), publishes closed loop, then deletes them. Prints events/s
and the delivery tasks stored per second.

``--schema`` declares bench.published in the catalogue with a JSON Schema every payload is
validated against (an invoice-sized one, with a $ref and formats); ``--filter`` gives each
endpoint a content filter the events match (a label, a payload range and an $in), and the
events their labels (issue 42).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import aiohttp

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["order", "total", "customer"],
    "properties": {
        "order": {"type": "integer", "minimum": 1},
        "total": {"type": "string", "pattern": "^[0-9]+\\.[0-9]{2}$"},
        "customer": {"$ref": "#/$defs/customer"},
        "placed_at": {"type": "string", "format": "date-time"},
    },
    "$defs": {
        "customer": {
            "type": "object",
            "required": ["email"],
            "properties": {"email": {"type": "string", "format": "email"}, "country": {"type": "string"}},
        }
    },
}
FILTER = {
    "labels.region": "eu",
    "payload.order": {"$gte": 1000},
    "payload.customer.country": {"$in": ["NL", "BE", "DE", "FR"]},
}
PAYLOAD = {
    "order": 1042,
    "total": "12.00",
    "customer": {"email": "ada@example.com", "country": "NL"},
    "placed_at": "2026-12-07T10:00:00Z",
}


async def main(args: argparse.Namespace) -> None:
    headers = {"authorization": f"Bearer {args.token}"} if args.token else {}
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    async with aiohttp.ClientSession(base_url=args.server, headers=headers, connector=connector) as http:
        if args.schema:
            async with http.put("/v1/event-types/bench.published", json={"schema": SCHEMA}) as response:
                assert response.status in (200, 201), await response.text()
        created = []
        for _ in range(args.endpoints):
            body: dict[str, Any] = {
                "url": "http://127.0.0.1:9/",
                "event_types": ["bench.*"],
                "tenant": "bench",
            }
            if args.filter:
                body["filter"] = FILTER
            async with http.post("/v1/endpoints", json=body) as response:
                assert response.status == 201, await response.text()
                created.append((await response.json())["id"])
        event: dict[str, Any] = {"type": "bench.published", "tenant": "bench", "payload": PAYLOAD}
        if args.filter:
            event["labels"] = {"region": "eu", "plan": "pro"}
        done = errors = deliveries = 0
        deadline = time.perf_counter() + args.seconds

        async def worker() -> None:
            nonlocal done, errors, deliveries
            while time.perf_counter() < deadline:
                async with http.post("/v1/events", json=event) as response:
                    answer = await response.json()
                    if response.status == 201:
                        done += 1
                        deliveries += len(answer["deliveries"])
                    else:
                        errors += 1

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        elapsed = time.perf_counter() - started
        for endpoint_id in created:
            async with http.delete(f"/v1/endpoints/{endpoint_id}") as response:
                assert response.status == 204, await response.text()
        if args.schema:
            async with http.delete("/v1/event-types/bench.published") as response:
                assert response.status == 204, await response.text()
    variant = "+".join(name for name in ("schema", "filter") if getattr(args, name)) or "plain"
    print(
        f"{args.endpoints} endpoints ({variant}): {done / elapsed:,.0f} events/s, "
        f"{deliveries / elapsed:,.0f} deliveries/s ({errors} errors) at concurrency {args.concurrency}"
    )
    assert deliveries == done * args.endpoints, "every event must reach every endpoint"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("server")
    parser.add_argument("endpoints", type=int, nargs="?", default=1)
    parser.add_argument("seconds", type=float, nargs="?", default=5.0)
    parser.add_argument("concurrency", type=int, nargs="?", default=32)
    parser.add_argument("token", nargs="?", default=None)
    parser.add_argument("--schema", action="store_true", help="validate each payload against a schema")
    parser.add_argument("--filter", action="store_true", help="a content filter on each endpoint")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(_arguments()))
