-- Pause an origin until a time (a later pause already stored stands), and
-- drop the pauses that ended. KEYS: pauses (a sorted set: origin -> until).
-- ARGV: until, origin, now.
local old = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[2]) or '0')
if not old or old < tonumber(ARGV[1]) then redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
