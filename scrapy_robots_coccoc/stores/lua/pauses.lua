-- The pauses not ended yet: {origin, until, ...}, at most ARGV[2] of them.
-- KEYS: pauses. ARGV: now, the most to return.
return redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
