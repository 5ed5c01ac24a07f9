"""The event log: JSON Lines files, replay."""
