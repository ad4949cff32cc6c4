"""The live causality page: the serializer tree and the regions, remote updates moving along it,
and the visibility latency per pair of regions, fed by server-sent events."""

from __future__ import annotations

import json
import threading
from collections.abc import Generator

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from webapp import causality_feed

FRAME_EVERY_S = 1.0
FRAMES_PER_STREAM = 30  # then the stream ends and the browser reconnects
STREAMS_PER_PROCESS = 2  # of gunicorn's 4 threads a process: the pages keep the others
RETRY_WHEN_FULL_S = 15
#: how long a new stream waits for a slot: a reload's old stream holds its slot until its next
#: frame finds the browser gone (one interval and a scrape of every region's metrics, which took
#: over 3 s on a busy 2-core machine), so quick reloads wait, not fail
WAIT_FOR_SLOT_S = 8.0
streams = threading.BoundedSemaphore(STREAMS_PER_PROCESS)


@require_GET
def page(request: HttpRequest) -> HttpResponse:
    topology = request.causal.ctx.topology
    context = {
        "me": request.causal.account,
        "layout": causality_feed.layout(topology),
        "serializers": [
            {"name": sz.name, "site": sz.site,
             "beside": [r.name for r in topology.regions if r.site == sz.site]}
            for sz in (topology.serializers if topology.traits.tree else [])
        ],
        "tree_ms": {
            f"{a}>{b}": {"bulk": topology.region_latency_ms(a, b),
                         "tree": topology.tree_path_ms(a, b) if topology.traits.tree else None}
            for a in topology.region_names for b in topology.region_names if a != b
        },
    }  # fmt: skip
    return render(request, "causality.html", context)


def event_stream(request: HttpRequest) -> Generator[str, None, None]:
    yield f"retry: {int(FRAME_EVERY_S * 1000)}\n\n"
    for frame in causality_feed.frames(request.causal.ctx.topology, FRAMES_PER_STREAM, FRAME_EVERY_S):
        yield f"event: frame\ndata: {json.dumps(frame, separators=(',', ':'))}\n\n"


class Slot:
    """The stream's iterator, holding a stream slot until it ends or the response is closed
    (the server closes it when the browser goes away, even before the first frame)."""

    def __init__(self, frames: Generator[str, None, None]):
        self.frames = frames
        self.held = True

    def __iter__(self) -> Slot:
        return self

    def __next__(self) -> str:
        try:
            return next(self.frames)
        except StopIteration:
            self.close()
            raise

    def close(self) -> None:
        if self.held:
            self.held = False
            streams.release()
        self.frames.close()


@require_GET
def events(request: HttpRequest) -> HttpResponse:
    """The stream, once a slot is free (within WAIT_FOR_SLOT_S): a few viewers must not take
    every thread of the web app (the page waits and tries again when told 503)."""
    if not streams.acquire(timeout=WAIT_FOR_SLOT_S):
        full = HttpResponse(
            "The live view is busy; try again shortly.", status=503, content_type="text/plain"
        )
        full["Retry-After"] = str(RETRY_WHEN_FULL_S)
        return full
    reply = StreamingHttpResponse(Slot(event_stream(request)), content_type="text/event-stream")
    reply["Cache-Control"] = "no-cache"
    reply["X-Accel-Buffering"] = "no"  # a proxy in front must not hold the frames back
    return reply
