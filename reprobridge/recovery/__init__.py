"""Recovery: findings become one manifest (static rules), optionally refined by an agent."""
