"""What the dashboard's in-process tests share: a browser's Origin header, logging in, the
cross-origin headers the buttons refuse, and a few constants.

conftest.py has the ``http`` fixture these are called with (and has pytest rewrite this
module's asserts, so that a failing one says what it compared).
"""

from __future__ import annotations

import re

import httpx

from tests.support.servers import TEST_TOKEN

HOOK = "http://127.0.0.1:9/hook"
SCRIPT = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"

# The headers of POSTs that do not come from the dashboard's own pages: no Origin at all,
# another site's, an opaque one, another port of this host.
FOREIGN_ORIGINS: list[dict[str, str]] = [
    {},
    {"origin": "http://evil.example"},
    {"origin": "null"},
    {"origin": "http://127.0.0.1:1"},
]
# An Origin that does not parse.
UNPARSABLE_ORIGIN = {"origin": "http://[::1"}
# This server's own origin, but sent (the browser says) from a page of another site.
CROSS_SITE = {"origin": "http://127.0.0.1:7337", "sec-fetch-site": "cross-site"}


def origin(http: httpx.AsyncClient) -> dict[str, str]:
    """The Origin header a browser sends with a form posted from one of this server's pages."""
    return {"origin": str(http.base_url).rstrip("/")}


async def log_in(http: httpx.AsyncClient, then: str | None = None) -> None:
    """Log in with the test token, as the login form does; with ``then`` (the form's ``next``),
    check that the login sends the browser there."""
    data = {"token": TEST_TOKEN} if then is None else {"token": TEST_TOKEN, "next": then}
    response = await http.post("/ui/login", data=data, headers=origin(http))
    if then is None:
        assert response.status_code == 303
    else:
        assert (response.status_code, response.headers["location"]) == (303, then)


def assert_refused_as_foreign(response: httpx.Response, headers: dict[str, str], what: str) -> None:
    """``response`` is the refusal of a button posted with the foreign ``headers``."""
    assert response.status_code == 403, what  # the API's cross-site guard, or the dashboard's own
    if not headers:  # no Origin at all: only the dashboard insists on one
        assert "not sent from one of this server" in response.text


def row(page: str, attribute: str, value: str) -> str:
    """The table row of ``page`` whose ``attribute`` is ``value``."""
    found = re.search(rf'<tr {attribute}="{re.escape(value)}".*?</tr>', page, re.S)
    assert found is not None, f"no row {attribute}={value}"
    return found.group(0)
