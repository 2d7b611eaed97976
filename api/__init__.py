"""xe2tune.api."""
