"""Saturn's metadata service (paper §5): label sink, serializers, remote proxy, tree links."""
