# Workly in production: `workly serve` on port 7337.
# Run with WORKLY_DATABASE_URL, WORKLY_SIGNING_SECRET and WORKLY_API_TOKENS set, e.g.
#   docker run -p 7337:7337 -e WORKLY_DATABASE_URL=postgresql://… -e WORKLY_SIGNING_SECRET=whsec_… \
#     -e WORKLY_API_TOKENS=… workly
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY workly ./workly
RUN pip install --no-cache-dir . \
    && rm -rf /src

RUN useradd --system --create-home --home-dir /home/workly --uid 10001 --user-group workly
USER workly
WORKDIR /home/workly

EXPOSE 7337

HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:7337/health/ready', timeout=4).status == 200 else 1)"]

CMD ["workly", "serve", "--host", "0.0.0.0", "--port", "7337"]
