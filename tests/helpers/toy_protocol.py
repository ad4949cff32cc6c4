"""A protocol that exists only for tests/test_protocol_traits.py: one class and one row of the
traits table, to show that nothing else needs to know its name."""

from services.protocols.eventual import Eventual
from services.traits import Traits


class Toy(Eventual):
    name = "toy"


TOY = Traits("toy", "helpers.toy_protocol:Toy", vectors=True, attach="vector", migration_label=False)
