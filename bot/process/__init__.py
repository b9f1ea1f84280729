"""The process that hosts the rest: settings, `tracegate serve` / `worker` / `demo`, probes,
metrics, logs, start-up checks and the services wired from them."""
