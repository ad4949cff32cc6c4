"""The web app's views, one module per area."""
