"""xe2tune.tuner."""
