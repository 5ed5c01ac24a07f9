"""ykbus: a YuniKorn-style scheduler core that resource managers talk to over NATS."""

__version__ = "0.1.0"
