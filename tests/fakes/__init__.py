"""Reusable fakes for tests: a Kubernetes API for a deployed stack, an OpenAI-compatible server."""
