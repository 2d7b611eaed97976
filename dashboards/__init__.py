"""xe2tune.dashboards."""
