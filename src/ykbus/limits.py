"""Every named capacity of ykbus, in one place. Overflow is a rejection, never growth."""

# Input messages
MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # one log entry body
MAX_CONFIG_BYTES = 1024 * 1024  # a queues.yaml text

# Core timers (nanoseconds), YuniKorn's defaults
COMPLETING_TIMEOUT_NS = 30 * 1_000_000_000  # Completing -> Completed
TERMINATED_TIMEOUT_NS = 3 * 24 * 3600 * 1_000_000_000  # Completed/Failed -> Expired, then forgotten
