-- Redis's clock: {seconds, microseconds}.
return redis.call('TIME')