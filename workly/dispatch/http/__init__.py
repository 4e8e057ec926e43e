"""Workly's HTTP/1.1 client for deliveries: ``HttpClient`` and what it answers or raises.

One module per concept: client.py (requests, proxy routes, the SSRF checks), connection.py
(one keep-alive connection and its parser), pool.py (idle connections), connect.py (Happy
Eyeballs, the proxy's tunnel), request.py (the request's bytes), tls.py (CA and client
certificate), errors.py.
"""

from workly.dispatch.http.client import HttpClient, Resolver, system_resolver
from workly.dispatch.http.connection import MAX_RESPONSE_HEADER_BYTES, HttpResponse
from workly.dispatch.http.errors import Blocked, ConnectError, HttpError, NotSent, ProtocolError, ProxyRefused
from workly.dispatch.http.tls import client_tls

__all__ = [
    "MAX_RESPONSE_HEADER_BYTES",
    "Blocked",
    "ConnectError",
    "HttpClient",
    "HttpError",
    "HttpResponse",
    "NotSent",
    "ProtocolError",
    "ProxyRefused",
    "Resolver",
    "client_tls",
    "system_resolver",
]
