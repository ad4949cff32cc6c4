"""The WAN emulation as the services see it.

Its core (a link's latency and jitter, the delay line that holds messages for it, the fault
control file, the relay table) is part of the client library, ``causal_client.wan``, because a
client placed at a site pays the same emulated latency and the client may import nothing of the
services. The services reach that core only through this package, which re-exports it; what only
the services need sits beside it: the relays' scheduler that gives a link a bandwidth and
priorities (scheduler.py; the relay process is services/relay/relay.py), their routes (routes.py)
and the flood that congests a link (flood.py). See
docs/OPERATIONS.md, "WAN emulation".
"""

from causal_client.wan import (
    AT_ONCE,
    CONTROL_ENV,
    TRAFFIC_CLASSES,
    DelayLine,
    Link,
    Relays,
    WanControl,
    control,
)

__all__ = [
    "AT_ONCE", "CONTROL_ENV", "TRAFFIC_CLASSES", "DelayLine", "Link", "Relays", "WanControl", "control",
]  # fmt: skip
