"""Replay and audit Kafka's __consumer_offsets topic."""
