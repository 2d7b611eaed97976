"""xe2tune.harness."""
