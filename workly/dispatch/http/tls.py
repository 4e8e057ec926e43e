"""The TLS settings of outbound deliveries: whom to trust, and what certificate to show."""

from __future__ import annotations

import ssl
from pathlib import Path

from workly.errors import ConfigError


def client_tls(
    ca_file: str | None = None, client_cert: str | None = None, client_key: str | None = None
) -> ssl.SSLContext:
    """Verification as Python's default context does it (system trust store, or the file
    SSL_CERT_FILE names; host names checked), plus the certificates of ``ca_file``; and
    ``client_cert`` (with ``client_key``, or a key inside the certificate's file) offered to
    receivers that ask for one (mTLS). A file that cannot be used is a ConfigError."""
    context = ssl.create_default_context()
    if ca_file is not None:
        _readable(ca_file, "WORKLY_OUTBOUND_CA_FILE")
        try:
            context.load_verify_locations(cafile=ca_file)
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigError(
                f"WORKLY_OUTBOUND_CA_FILE {ca_file}: no PEM certificate could be read ({exc})"
            ) from None
    if client_key is not None and client_cert is None:
        raise ConfigError("WORKLY_OUTBOUND_CLIENT_KEY needs WORKLY_OUTBOUND_CLIENT_CERT")
    if client_cert is not None:
        _readable(client_cert, "WORKLY_OUTBOUND_CLIENT_CERT")
        if client_key is not None:
            _readable(client_key, "WORKLY_OUTBOUND_CLIENT_KEY")
        try:
            context.load_cert_chain(client_cert, client_key, password=_no_password)
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigError(
                f"WORKLY_OUTBOUND_CLIENT_CERT {client_cert}: the certificate and its key could not be "
                f"loaded ({exc}); both must be PEM, the key unencrypted and matching the certificate"
            ) from None
    return context


def _readable(path: str, setting: str) -> None:
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"{setting} {path}: no such file")
    try:
        file.open("rb").close()
    except OSError as exc:
        raise ConfigError(f"{setting} {path}: cannot be read ({exc.strerror})") from None


def _no_password() -> bytes:
    # An encrypted key would otherwise make OpenSSL ask on the terminal.
    raise ValueError("the key is encrypted; Workly takes an unencrypted key")
