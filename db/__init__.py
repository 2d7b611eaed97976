"""xe2tune.db."""
