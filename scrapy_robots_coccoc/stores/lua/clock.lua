-- Redis's clock: {seconds, microseconds}. KEYS: one, which picks the node of a cluster.
return redis.call('TIME')
