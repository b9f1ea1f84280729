"""What tests that share `make test`'s Redis agree on."""

PREFIX = "tracegate"  # REDIS_PREFIX of the investigators tests open on the shared Redis
