"""The Vivace family's library (``vivace``, ``vivace-strong``): Vivace §6.4's figures, which both
experiments set their runs beside. Not an experiment."""

from __future__ import annotations

#: Vivace §6.4, Twissandra under congestion: (median s, max s) with its prior algorithms (no
#: priority) and with its new ones (prioritised critical messages).
VIVACE = {
    "R1 post": ((2.0, 14.1), (0.3, 0.4)),
    "R2 a user's tweets": ((1.2, 11.3), (0.4, 0.6)),
    "R3 home timeline": ((2.0, 11.9), (0.5, 0.8)),
}
