"""A topology file for a load test: a base topology plus the replication groups a workload needs
(the Facebook placement's replica sets, the synthetic workload's buckets)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import tomli_w

from services.topology import ALL_REGIONS, Topology


def group_name(regions: Sequence[str], members: Sequence[str], prefix: str) -> str:
    """The replication group of a replica set: ``prefix.`` + its regions in topology order
    (``regions``); region indices (``fb.r0.r2``) instead if a region name has a dot, which would
    make the name ambiguous."""
    chosen = set(members)
    if any("." in r for r in regions):
        return ".".join([prefix, *(f"r{i}" for i, r in enumerate(regions) if r in chosen)])
    return ".".join([prefix, *(r for r in regions if r in chosen)])


def write_with_groups(
    base: Topology, groups: Mapping[str, Sequence[str]], out_path: str | Path, name: str, about: str
) -> Path:
    """Writes ``base`` (every field, as TOML) plus ``groups`` to ``out_path``, with ``about`` (one
    line or more) in its heading comment; the result loads with ``Topology.load``. A base without
    groups had ``all`` implicitly: it is written out. A group the base has with other regions is
    refused (ValueError)."""
    out_path = Path(out_path)
    data = base.model_dump(exclude_defaults=True, exclude_none=True)
    head = {
        "name": name,
        "protocol": base.protocol,
        "host": base.host,
        "base_port": base.base_port,
        "max_value_bytes": base.max_value_bytes,
        "jitter_ms": base.jitter_ms,
    }
    merged = {g: list(members) for g, members in base.groups.items()} or {"all": [ALL_REGIONS]}
    for group, members in groups.items():
        if group in merged and base.group_members.get(group) != tuple(members):
            raise ValueError(
                f"{base.source} already has a group {group!r} with other regions: {merged[group]}"
            )
        merged[group] = list(members)
    document: dict[str, object] = dict(head)
    for key in ("latency_ms", "regions"):
        if key in data:
            document[key] = data[key]
    document["groups"] = merged
    document.update({key: value for key, value in data.items() if key not in document})
    Topology.from_dict(document, source=str(out_path))  # fail here, not in the launcher
    comment = "".join(f"# {line}\n" for line in f"{name}: {base.source} plus {about}".splitlines())
    out_path.write_text(
        comment + "# Written by the load test; regenerate rather than edit.\n\n" + tomli_w.dumps(document)
    )
    return out_path
