"""The API reference at /docs: Swagger UI over /openapi.json.

Swagger UI comes from jsDelivr at one pinned version, with Subresource Integrity hashes, and
the page's Content-Security-Policy allows scripts only from this server and that version's
folder: the page shares its origin with the dashboard, so a changed or compromised copy of
the script must not run. (FastAPI's own /docs loads the newest 5.x, unchecked, and is off.)
To move to another version, take the files' hashes from its npm package:
``npm pack swagger-ui-dist@X``, then ``openssl dgst -sha384 -binary F | openssl base64 -A``.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

SWAGGER_UI = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5.35.0/"
_JS_INTEGRITY = "sha384-gjRm0bEPMeTmMh5jT2cHccIwCUZSTd8YC+j0d0sXw0MdGEfScduGpSyF3ZSSLkX9"
_CSS_INTEGRITY = "sha384-WlYgdmXYOOBWL5apwjDEZwN+U3HmXSSu5R6V5aGxEcf7z+KuRNwBhoxKVN1i3D5I"
_POLICY = (
    f"default-src 'none'; script-src 'self' {SWAGGER_UI}; style-src 'unsafe-inline' {SWAGGER_UI}; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
_PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Workly API reference</title>
<link rel="stylesheet" href="{SWAGGER_UI}swagger-ui.css" integrity="{_CSS_INTEGRITY}" crossorigin="anonymous">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{SWAGGER_UI}swagger-ui-bundle.js" integrity="{_JS_INTEGRITY}" crossorigin="anonymous"></script>
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

router = APIRouter(include_in_schema=False)


@router.get("/docs")
async def reference() -> HTMLResponse:
    return HTMLResponse(_PAGE, headers=_HEADERS)


@router.get("/docs/swagger-init.js")
async def reference_script() -> Response:
    return Response(_INIT, media_type="text/javascript", headers={"cache-control": "no-store"})
