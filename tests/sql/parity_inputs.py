"""The inputs of tests/sql/test_parity.py: one table of cases with the verdict both the API
and enqueue_task must give, and hypothesis strategies around it (any input, and valid input
only, so that what both store is compared field by field).

A field left out of a dict is an argument left out; None is JSON null (SQL NULL).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import strategies as st

URL = "http://127.0.0.1:9/hook"

# --- the shared table ----------------------------------------------------------------
# (queue, fields, accepted); every row goes to both, and must get this verdict from both.
TABLE: list[tuple[str, dict[str, Any], bool]] = [
    ("q", {"url": URL}, True),
    ("q", {}, False),
    ("q", {"url": None}, False),
    ("ep_x", {"url": URL}, False),
    ("workly.callbacks", {"url": URL}, False),
    ("workly.x", {"url": URL}, False),
    ("workly", {"url": URL}, True),
    ("q", {"url": URL, "idempotency_key": "schedule:sch_x:2026-12-07T00:00:00Z"}, False),
    ("q", {"url": URL, "idempotency_key": "my-schedule:1"}, True),
    ("a.b-c_D9", {"url": URL}, True),
    ("-q", {"url": URL}, False),
    ("q" * 128, {"url": URL}, True),
    ("q" * 129, {"url": URL}, False),
    ("q", {"url": "ftp://example.com/"}, False),
    ("q", {"url": "HTTPS://Example.COM:0443/x?y#z"}, True),
    ("q", {"url": "http://u:p@example.com/"}, False),
    ("q", {"url": "http://example.com:0/"}, False),
    ("q", {"url": "http://example.com:65536/"}, False),
    ("q", {"url": "http://example.com:/"}, True),
    ("q", {"url": "http://[::1]:8080/"}, True),
    ("q", {"url": "http://[fe80::1%25eth0]/"}, True),
    ("q", {"url": "http://[1.2.3.4]/"}, False),
    ("q", {"url": "http://[::1%25a\\b]/"}, False),
    ("q", {"url": "http://[v1.x]/"}, False),
    ("q", {"url": "http://[::ffff:1.2.3.4]/"}, True),
    ("q", {"url": "http://[::ffff:01.2.3.4]/"}, False),
    ("q", {"url": "http://a[::1]/"}, False),
    ("q", {"url": "http://a<b/"}, False),
    ("q", {"url": "http://%41/"}, True),
    ("q", {"url": "http://a%zz/"}, False),
    ("q", {"url": "http://example.com/a b"}, False),
    ("q", {"url": "http://example.com/é"}, True),
    ("q", {"url": "http://example.com/\u00a0"}, False),
    ("q", {"url": "http://" + "a" * 4090}, False),
    ("q", {"url": URL, "method": "TRACE"}, False),
    ("q", {"url": URL, "method": "post"}, False),
    ("q", {"url": URL, "method": None}, False),
    ("q", {"url": URL, "headers": {"X-A": "1", "x-a": "2"}}, False),
    ("q", {"url": URL, "headers": {"Host": "x"}}, False),
    ("q", {"url": URL, "headers": {"webhook-id": "x"}}, False),
    ("q", {"url": URL, "headers": {"X": " padded"}}, False),
    ("q", {"url": URL, "headers": {"X": "caf\u00e9"}}, True),
    ("q", {"url": URL, "headers": {"X": "\u20ac"}}, False),
    ("q", {"url": URL, "headers": {"X": 1}}, False),
    ("q", {"url": URL, "headers": None}, False),
    ("q", {"url": URL, "headers": {f"h{i}": "v" for i in range(65)}}, False),
    ("q", {"url": URL, "headers": {"content-type": "text/plain"}, "body": "hello"}, True),
    ("q", {"url": URL, "headers": {"content-type": "application/cloudevents+json"}, "body": "hi"}, True),
    ("q", {"url": URL, "body": {"a": [1, 2.5, None, True]}}, True),
    ("q", {"url": URL, "body": None}, True),
    ("q", {"url": URL, "body": None, "body_base64": "YQ=="}, False),
    ("q", {"url": URL, "body": {"a": 1}, "body_base64": "YQ=="}, False),
    ("q", {"url": URL, "body_base64": "YWJj="}, False),
    ("q", {"url": URL, "body_base64": "YQ"}, False),
    ("q", {"url": URL, "body_base64": "YWJj==="}, False),
    ("q", {"url": URL, "body_base64": "YWI==="}, False),
    ("q", {"url": URL, "body_base64": "YQ=a"}, False),
    ("q", {"url": URL, "body_base64": "=="}, False),
    ("q", {"url": URL, "body_base64": "A" * (256 * 1024 // 3 * 4)}, True),
    ("q", {"url": URL, "body_base64": "A" * ((256 * 1024 // 3 + 1) * 4)}, False),
    ("q", {"url": URL, "delay": 5, "run_at": "2030-01-01T00:00:00+00:00"}, False),
    ("q", {"url": URL, "delay": -1}, False),
    ("q", {"url": URL, "delay": 366 * 86400}, True),
    ("q", {"url": URL, "delay": 366 * 86400 + 0.5}, False),
    ("q", {"url": URL, "run_at": "1969-12-31T23:59:59+00:00"}, False),
    ("q", {"url": URL, "run_at": "2999-12-31T23:00:00-01:00"}, False),
    ("q", {"url": URL, "run_at": "2999-12-31T23:00:00+01:00"}, True),
    ("q", {"url": URL, "priority": 1_000_000}, True),
    ("q", {"url": URL, "priority": -1_000_001}, False),
    ("q", {"url": URL, "priority": None}, False),
    ("q", {"url": URL, "key": ""}, False),
    ("q", {"url": URL, "key": "k" * 255}, True),
    ("q", {"url": URL, "tenant": "t\x7f"}, False),
    ("q", {"url": URL, "idempotency_key": "k\n"}, False),
    ("q", {"url": URL, "tenant": "acme\x85"}, True),
    ("q", {"url": URL, "max_attempts": 0}, False),
    ("q", {"url": URL, "max_attempts": 1000}, True),
    ("q", {"url": URL, "timeout": 0}, False),
    ("q", {"url": URL, "timeout": 3600}, True),
    ("q", {"url": URL, "stop_on": ["404", "4xx", "404"]}, True),
    ("q", {"url": URL, "stop_on": []}, True),
    ("q", {"url": URL, "stop_on": ["200"]}, False),
    ("q", {"url": URL, "stop_on": ["5XX"]}, False),
    ("q", {"url": URL, "stop_on": ["404"] * 101}, False),
    ("q", {"url": URL, "deadline": 0}, False),
    ("q", {"url": URL, "min_backoff": 0, "max_backoff": 0}, True),
    ("q", {"url": URL, "min_backoff": 10, "max_backoff": 5}, False),
    ("q", {"url": URL, "max_backoff": 30 * 86400 + 1}, False),
    ("q", {"url": URL, "callback_url": "https://example.com/cb"}, True),
    ("q", {"url": URL, "failure_callback_url": "mailto:x@example.com"}, False),
]


# --- the same, over generated input --------------------------------------------------
_URL_PARTS = st.tuples(
    st.sampled_from(["http", "https", "HTTP", "Https", "ftp", "", "h-t"]),
    st.sampled_from(["://", "://", ":/", ":", "//"]),
    st.sampled_from(["", "", "u@", "u:p@", "@"]),
    st.one_of(
        st.sampled_from(
            [
                "example.com",
                "127.0.0.1",
                "[::1]",
                "[fe80::1%25eth0]",
                "[v1.x]",
                "[::1",
                "::1]",
                "a_b",
                "%41",
                "a%zz",
                "",
                "[1.2.3.4]",
                "[::ffff:1.2.3.4]",
                "[1:2:3:4:5:6:7:8]",
                "[1::2::3]",
                "[::]",
                "[:::]",
                "[1:2:3:4:5:6:7::]",
                "[::1:2:3:4:5:6:7]",
                "[1:2:3:4:5:6:7:8:9]",
                "[12345::]",
                "[::g]",
                "[1:2:3:4:5:6:1.2.3.4]",
                "[::1%]",
                "[a::b%x%y]",
                "a<b",
                "a\\b",
                "a b",
                "a]b",
            ]
        ),
        st.text(alphabet="ab1.-_~%:[]@!$&'()*+,;=<>\\^`{|}\"é", max_size=8),
    ),
    st.sampled_from(
        ["", "", ":", ":80", ":0", ":65535", ":65536", ":0080", ":+1", ":8a", ":\u0661", ":00000000080"]
    ),
    st.sampled_from(["", "/", "/hook", "/a b", "/é", "?q=1", "#f", "/%zz", "/\t", "/\x7f", "/?#[]@"]),
).map("".join)
urls = st.one_of(_URL_PARTS, st.text(max_size=30).filter(lambda s: "\x00" not in s))
texts = st.one_of(
    st.none(),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=12),
    st.sampled_from(["", "k" * 255, "k" * 256, "a\x01", "a\x7f", "a\x9f", "é€", "schedule:s"]),
)
header_names = st.one_of(
    st.sampled_from(["X-A", "x-a", "Host", "webhook-id", "Content-Type", "a b", ""]),
    st.from_regex(r"\A[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,8}\Z"),
)
header_values = st.one_of(
    st.text(
        alphabet=st.characters(
            blacklist_categories=["Cs"], blacklist_characters="\x00", max_codepoint=0x2100
        ),
        max_size=10,
    ),
    st.sampled_from(["application/json", "text/plain", "application/x+json; charset=utf-8", " x", "x\t"]),
    st.integers(0, 9),
)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5).filter(lambda s: "\x00" not in s), inner, max_size=3)
    ),
    max_leaves=8,
)
numbers = st.one_of(
    st.none(),
    st.integers(-10, 40_000_000),
    st.floats(min_value=-10, max_value=4e7),
    st.sampled_from([0, 0.0, -0.0, 3600, 3600.0001, 86400, 2592000, 31622400, math.nan, math.inf]),
)
offsets = st.sampled_from([UTC, timezone(timedelta(hours=-1)), timezone(timedelta(hours=5, minutes=30))])
run_ats = st.datetimes(min_value=datetime(1969, 12, 30), max_value=datetime(3000, 1, 2), timezones=offsets)
stop_ons = st.one_of(
    st.none(),
    st.lists(
        st.sampled_from(["404", "4xx", "410", "200", "2xx", "600", "abc", "5XX", "3xx", "599", "300", "299"]),
        max_size=4,
    ),
)
FIELDS = {
    "url": urls,
    "method": st.sampled_from(
        ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "post", "TRACE", None]
    ),
    "headers": st.one_of(
        st.dictionaries(header_names, header_values, max_size=4), st.sampled_from([None, [], "x"])
    ),
    "body": json_values,
    "body_base64": st.one_of(
        st.none(),
        st.sampled_from(["", "YQ==", "YWJj=", "YQ", "Y", "YR==", "=", "YQ=a", "YW I="]),
        st.from_regex(r"\A[A-Za-z0-9+/]{0,9}={0,3}\Z"),
    ),
    "delay": numbers,
    "run_at": st.one_of(st.none(), run_ats.map(lambda d: d.isoformat())),
    "priority": st.one_of(st.none(), st.integers(-1_000_002, 1_000_002)),
    "key": texts,
    "tenant": texts,
    "idempotency_key": texts,
    "max_attempts": st.one_of(st.none(), st.integers(-2, 1002)),
    "timeout": numbers,
    "stop_on": stop_ons,
    "deadline": numbers,
    "min_backoff": numbers,
    "max_backoff": numbers,
    "callback_url": st.one_of(st.none(), urls),
    "failure_callback_url": st.one_of(st.none(), urls),
}
inputs = st.tuples(
    st.one_of(
        st.sampled_from(["q", "ep_x", "a.b", "-x", "Q" * 129, "workly.q"]),
        st.from_regex(r"\A[A-Za-z0-9._-]{1,6}\Z"),
    ),
    st.fixed_dictionaries(
        {"url": st.one_of(st.just(URL), urls)}, optional={n: s for n, s in FIELDS.items() if n != "url"}
    ),
)


_printable = st.text(alphabet=st.characters(blacklist_categories=["Cc", "Cs"]), min_size=1, max_size=12)
_token = st.from_regex(r"\A[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,8}\Z").filter(
    lambda name: (
        name.lower() not in {"host", "te", "expect", "trailer", "upgrade", "connection", "keep-alive"}
        and not name.lower().startswith(("webhook-", "content-length", "transfer-encoding", "proxy-"))
    )
)
_latin1 = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f"), max_size=10
).filter(lambda v: v == v.strip(" \t") and not any(0x80 <= ord(c) <= 0x9F for c in v))
valid_urls = st.builds(
    "{}://{}{}{}".format,
    st.sampled_from(["http", "https", "HTTPS"]),
    st.one_of(
        st.from_regex(r"\A[a-zA-Z0-9-]{1,10}(\.[a-zA-Z0-9-]{1,10}){0,2}\Z"),
        st.sampled_from(["[::1]", "[2001:DB8::1]", "[fe80::1%25eth0]", "127.0.0.1", "%41b"]),
    ),
    st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}")),
    st.sampled_from(["", "/", "/hook", "/é?x=1#f", "/a%20b"]),
)
VALID_FIELDS = {
    "method": st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
    "headers": st.dictionaries(_token, _latin1, max_size=3).filter(
        lambda h: len({name.lower() for name in h}) == len(h)
    ),
    "body": json_values,
    "delay": st.one_of(st.integers(0, 31622400), st.floats(0, 31622400)),
    "run_at": st.datetimes(
        min_value=datetime(1970, 1, 2), max_value=datetime(2999, 12, 30), timezones=offsets
    ).map(lambda d: d.isoformat()),
    "priority": st.integers(-1_000_000, 1_000_000),
    "key": _printable,
    "tenant": _printable,
    "idempotency_key": _printable.map(lambda k: f"parity-{k}"),
    "max_attempts": st.integers(1, 1000),
    "timeout": st.floats(0.001, 3600),
    "stop_on": st.lists(st.sampled_from(["404", "4xx", "410", "3xx", "599"]), max_size=4),
    "deadline": st.floats(0.5, 31622400),
    "min_backoff": st.floats(0, 10),
    "max_backoff": st.floats(10, 2592000),
    "callback_url": valid_urls,
    "failure_callback_url": valid_urls,
}


@st.composite
def valid_inputs(draw: st.DrawFn) -> dict[str, Any]:
    fields = draw(st.fixed_dictionaries({"url": valid_urls}, optional=VALID_FIELDS))
    if "delay" in fields and "run_at" in fields:
        del fields["run_at"]
    if "body" in fields and draw(st.booleans()):
        del fields["body"]
        fields["body_base64"] = draw(st.sampled_from(["", "YQ==", "YWJj", "AAECAwQ=", "/+/+"]))
    return fields
