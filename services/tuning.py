"""Saturn's timings, in one validated object: the topology's optional ``[saturn]`` table.

They must agree with each other: a proxy calls the tree down when an origin has been silent for
``tree_silence_s``, so the sinks' heartbeats must come several times within it, and the slack a
heartbeat may gather on its way must keep it well inside it. The defaults are what the
measurements in docs/MEASUREMENTS.md were taken with (docs/PROTOCOLS.md, "What the label path
costs: heartbeats and label batching", says why).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

HEARTBEATS_PER_SILENCE = 3  # a tree is down after this many missed sink heartbeats, not sooner


class SaturnTuning(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: a sink's heartbeat label goes up the tree this often (unless labels that reach every
    #: region went out meanwhile)
    sink_heartbeat_s: float = Field(default=0.5, gt=0)
    #: an origin silent this long on the tree means the tree is down: timestamp order (§6.1)
    tree_silence_s: float = Field(default=1.5, gt=0)
    #: how much longer than its link's latency a heartbeat may wait per hop, for company
    heartbeat_slack_s: float = Field(default=0.1, ge=0)
    #: and never past this age (made to arrival), so that liveness stays far from the silence
    heartbeat_max_age_s: float = Field(default=0.3, gt=0)
    #: a bulk sender's heartbeat period while a receiver orders by timestamp (its stable time)
    bulk_heartbeat_s: float = Field(default=0.1, gt=0)
    #: delays between a tree link's reconnection attempts (the last one repeats)
    link_retry_s: tuple[float, ...] = Field(default=(0.05, 0.1, 0.2, 0.5, 1.0), min_length=1)
    #: delays between a bulk sender's reconnection attempts (the last one repeats)
    bulk_retry_s: tuple[float, ...] = Field(default=(0.1, 0.2, 0.5, 1.0, 2.0), min_length=1)
    #: the label sink runs in the bulk sender's process (one event loop for a region's two
    #: streams) instead of a process of its own: 20-26 µs of CPU per operation less on Fig. 5's
    #: workload (``python -m loadtest bench sink-placement``, docs/MEASUREMENTS.md)
    sink_in_bulk_sender: bool = True

    @model_validator(mode="after")
    def _consistent(self) -> SaturnTuning:
        if self.tree_silence_s < HEARTBEATS_PER_SILENCE * self.sink_heartbeat_s:
            raise ValueError(
                f"tree_silence_s ({self.tree_silence_s:g}) must be at least {HEARTBEATS_PER_SILENCE} "
                f"sink heartbeats ({HEARTBEATS_PER_SILENCE} * sink_heartbeat_s = "
                f"{HEARTBEATS_PER_SILENCE * self.sink_heartbeat_s:g}): one late heartbeat must not "
                "send every region to timestamp order"
            )
        if self.heartbeat_max_age_s >= self.tree_silence_s - self.sink_heartbeat_s:
            raise ValueError(
                f"heartbeat_max_age_s ({self.heartbeat_max_age_s:g}) must stay below tree_silence_s "
                f"minus one heartbeat ({self.tree_silence_s - self.sink_heartbeat_s:g}): slack must "
                "never make a live tree look silent"
            )
        if self.heartbeat_slack_s > self.heartbeat_max_age_s:
            raise ValueError(
                f"heartbeat_slack_s ({self.heartbeat_slack_s:g}) must not exceed heartbeat_max_age_s "
                f"({self.heartbeat_max_age_s:g})"
            )
        if any(d < 0 for d in (*self.link_retry_s, *self.bulk_retry_s)):
            raise ValueError("retry delays must not be negative")
        return self


class StabilizationTuning(BaseModel):
    """GentleRain's and Cure's timings: the topology's optional ``[stabilization]`` table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the stable time (vector) is computed, and what it covers applied, at most this often (the
    #: Saturn paper ran both baselines' stabilization every 5 ms)
    period_s: float = Field(default=0.005, gt=0)
    #: an idle gear heartbeats every region it ships to this often: the stable time follows it.
    #: Each heartbeat is a Lua call and a message at both ends; with every region on one 2-core
    #: machine, 5 ms kept seven idle regions' CPUs busy (docs/MEASUREMENTS.md)
    heartbeat_s: float = Field(default=0.01, gt=0)


class StrongSettings(BaseModel):
    """The `[strong]` table: how strong (red) operations are ordered (causal_client/strong.py,
    causal_client/token.py). Each mode keeps its own registers: a deployment that changes mode
    starts the other mode's registers empty (usernames stay unique: an existing account row is
    a taken name either way)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: "vivace": linearizable registers at any majority of the regions (Vivace's algorithms);
    #: "token": red operations run by the region holding a token the regions pass in turn
    #: (RedBlue's Gemini), which stops while any region is unreachable
    mode: Literal["vivace", "token"] = "vivace"
    #: how long each region holds the token in turn (Gemini's prototype: 1 s)
    token_hold_ms: float = Field(default=1000.0, gt=0, le=60000)
