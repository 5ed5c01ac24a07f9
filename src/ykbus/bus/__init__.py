"""The NATS side: subjects, streams, the core service, and the RM client library."""
