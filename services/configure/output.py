"""From a placed shape to a topology's serializers and tree: fuse what the paper says can be
fused (§5.5: two adjacent serializers at one site with no delay between them are one), drop a
serializer that only relays between two neighbours when a direct edge with a delay keeps every
path's latency (the binary tree's root, usually), and name the rest after their sites."""

from __future__ import annotations

from dataclasses import dataclass

from services.configure.placement import Instance, Placement

EPSILON_MS = 1e-6


@dataclass
class Config:
    serializers: list[tuple[str, str]]  # (name, site)
    edges: list[tuple[str, str, float]]  # (a, b, delay ms)

    def topology_fields(self) -> dict:
        """The configuration as a topology's ``serializers`` and ``tree`` (and Saturn's protocol)."""
        tree = [{"a": a, "b": b, **({"delay_ms": delay} if delay else {})} for a, b, delay in self.edges]
        serializers = [{"name": name, "site": site} for name, site in self.serializers]
        return {"protocol": "saturn", "serializers": serializers, "tree": tree}


def simplify(placement: Placement, instance: Instance) -> Config:
    site: dict[int | str, str] = {n: placement.site(n, instance) for e in placement.tree.edges for n in e}
    delay: dict[frozenset, float] = {
        frozenset(edge): d for edge, d in zip(placement.tree.edges, placement.delays, strict=True)
    }

    def neighbours(node: int | str) -> list[int | str]:
        return [next(iter(edge - {node})) for edge in delay if node in edge]

    changed = True
    while changed:
        changed = False
        for edge, d in list(delay.items()):
            u, v = sorted(edge, key=str)
            if isinstance(u, int) and isinstance(v, int) and site[u] == site[v] and d < EPSILON_MS:
                for w in neighbours(v):  # v's edges move to u
                    if w != u:
                        delay[frozenset((u, w))] = delay.pop(frozenset((v, w)))
                del delay[edge]
                changed = True
                break
        if changed:
            continue
        for node in {n for edge in delay for n in edge if isinstance(n, int)}:
            around = neighbours(node)
            if len(around) != 2 or all(isinstance(n, str) for n in around):
                continue
            u, v = around
            through = sum(instance.latency(site[node], site[n]) + delay[frozenset((node, n))] for n in around)
            direct = through - instance.latency(site[u], site[v])
            if direct >= -EPSILON_MS:  # the latencies obey the triangle inequality here
                del delay[frozenset((node, u))], delay[frozenset((node, v))]
                delay[frozenset((u, v))] = max(0.0, direct)
                changed = True
                break
    names = _names({n for edge in delay for n in edge if isinstance(n, int)}, site)
    edges = []
    for edge, d in delay.items():
        a, b = sorted((names.get(n, n) for n in edge), key=lambda n: (n in names.values(), n))
        edges.append((str(a), str(b), round(d, 3)))
    serializers = sorted((name, site[n]) for n, name in names.items())
    return Config(serializers, sorted(edges, key=lambda e: (e[1], e[0])))


def _names(serializers: set[int], site: dict[int | str, str]) -> dict[int, str]:
    names: dict[int, str] = {}
    for n in sorted(serializers):
        base = f"s-{site[n].lower()}"
        name, k = base, 2
        while name in names.values():
            name, k = f"{base}-{k}", k + 1
        names[n] = name
    return names
