"""The Scheduler Interface: wire messages and their codecs."""
