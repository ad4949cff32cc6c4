"""The label path that Saturn and C3 share: the pump that reads a region's label streams in
timestamp order (pump.py) and the delayed FIFO links between the tree's nodes (links.py)."""
