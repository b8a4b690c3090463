"""kafka-python client settings shared by the Kafka source (``sources.kafka``) and the group-config capture
(``group_configs``): the keywords a client class accepts, with the wait for a first broker bounded."""
from __future__ import annotations

from typing import Any, Mapping


def client_settings(client_class, settings: Mapping[str, Any], bootstrap_wait_ms: int) -> dict[str, Any]:
    """``settings`` for ``client_class`` (``KafkaConsumer``, ``KafkaAdminClient``): the wait for a first broker
    bounded by ``bootstrap_wait_ms`` unless ``settings`` sets it (kafka-python 3 names it ``bootstrap_timeout_ms``,
    2.x ``api_version_auto_timeout_ms``; its own default, 30 s, is what an unreachable cluster costs), and only the
    keywords this kafka-python's class knows (``DEFAULT_CONFIG``), so that either version accepts them."""
    merged = {"bootstrap_timeout_ms": bootstrap_wait_ms, "api_version_auto_timeout_ms": bootstrap_wait_ms, **settings}
    return {k: v for k, v in merged.items() if k in client_class.DEFAULT_CONFIG}
