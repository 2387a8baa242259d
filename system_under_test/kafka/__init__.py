"""Kafka's wire protocol, as squall's broker will speak it: primitives, frames and headers,
the request and response bodies of the APIs real clients need (schema-driven, one module per
API), and RecordBatch v2. KAFKA_PROTOCOL.md describes what is implemented and what is refused.
"""
