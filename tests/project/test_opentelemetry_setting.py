"""`STATEGYM_OPENTELEMETRY`: FastAPI's native spans run only when it is on.

A process of its own per case: the global tracer provider can be set once per process. The
provider records the spans FastAPI starts (the API package alone has no SDK to do it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import TEST_SECRET

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import asyncio, json, sys
import httpx
from opentelemetry import trace
from app.server.api import create_app
from app.settings import Settings

started = []

class RecordingTracer(trace.NoOpTracer):
    def start_span(self, name, *args, **kwargs):
        started.append(name)
        return super().start_span(name, *args, **kwargs)

    def start_as_current_span(self, name, *args, **kwargs):
        started.append(name)
        return super().start_as_current_span(name, *args, **kwargs)

class RecordingProvider(trace.TracerProvider):  # not a NoOp subclass: FastAPI skips those
    def get_tracer(self, *args, **kwargs):
        return RecordingTracer()

trace.set_tracer_provider(RecordingProvider())
settings = Settings(data_dir=sys.argv[1], env="retail", secret_key=sys.argv[2],
                    opentelemetry=sys.argv[3] == "on")
app = create_app(settings)

async def main():
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            answer = await c.get("/health")
            assert answer.status_code == 200, answer.text

asyncio.run(main())
print(json.dumps(started))
"""


@pytest.mark.parametrize("setting, spans", [("off", False), ("on", True)])
def test_fastapi_spans_run_only_with_the_setting(tmp_path: Path, setting: str, spans: bool):
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path), TEST_SECRET, setting],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    started = json.loads(done.stdout.strip().splitlines()[-1])
    assert bool(started) is spans, started
