"""A job's way in and through: intake at every door, its states, the broker, the fleet that serves it, cancels."""
