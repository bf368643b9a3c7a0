"""End-to-end runs: pytest on a project (pytester or a subprocess), the CLI, servers, xdist, the report."""
