"""The server's own view of each level, from server_metrics.csv through the engine-name mapping
(contract.server_metrics): `series` rebuilds the scraped series, `histogram` holds the
bucket math, `means` the per-level `server` section, `latency` the `server_latency` section,
`overhead` the client-versus-server split. Pure: frames in, dicts out."""
