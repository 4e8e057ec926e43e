"""The API reference at /docs: Swagger UI over /openapi.json, served by this server alone.

Swagger UI's files come from the installed ``swagger-ui-py`` package (pinned in
pyproject.toml; it ships Swagger UI's dist files), so the reference works on a machine
without internet, and its page's Content-Security-Policy allows scripts and styles from
this server only: the page shares its origin with the dashboard, so nothing from elsewhere
may run there. (FastAPI's own /docs loads the newest 5.x from a CDN, unchecked, and is off.)
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse, Response

from workly.errors import NotFoundError

_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Workly API reference</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/swagger-init.js"></script>
</body>
</html>
"""
_INIT = """window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
});
"""
_HEADERS = {"content-security-policy": _POLICY, "x-frame-options": "DENY", "cache-control": "no-store"}
_ASSETS = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css"}

router = APIRouter(include_in_schema=False)


class AssetNotFound(NotFoundError):
    def __init__(self, name: str) -> None:
        super().__init__(f"the API reference has no file {name!r}")


@cache
def _asset_folder() -> Path:
    # An installed package on disk (a wheel is never imported zipped here).
    return Path(str(resources.files("swagger_ui") / "static"))


@router.get("/docs")
async def reference() -> HTMLResponse:
    return HTMLResponse(_PAGE, headers=_HEADERS)


@router.get("/docs/swagger-init.js")
async def reference_script() -> Response:
    return Response(_INIT, media_type="text/javascript", headers={"cache-control": "no-store"})


@router.get("/docs/assets/{name}")
async def reference_asset(name: str) -> FileResponse:
    if name not in _ASSETS:
        raise AssetNotFound(name)
    # private: it is served behind the API token, so no shared cache may keep it
    return FileResponse(
        _asset_folder() / name, media_type=_ASSETS[name], headers={"cache-control": "private, max-age=86400"}
    )
