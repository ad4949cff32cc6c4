"""The Twissandra-style web app over the causal store (built in the web-app issue)."""
