"""Links with a bandwidth between sites: one relay per site pair that every connection between the
two sites goes through, sharing the link's capacity (docs/ARCHITECTURE.md, "WAN emulation").
"""
