"""Where the per-host work of a job runs: in this process or on a Dask cluster,
behind the one analysis protocol."""
