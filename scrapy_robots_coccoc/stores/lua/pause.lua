-- Pause an origin until a time (a later pause already stored stands), and
-- drop the pauses that ended. KEYS: pauses (a sorted set: origin -> until).
-- ARGV: until, origin, now, the seconds the set must live at least, the channel announcing pauses, and how
-- (PUBLISH, or SPUBLISH on a cluster: the channel shares the set's slot).
local old = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[2]) or '0')
if not old or old < tonumber(ARGV[1]) then redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
-- The set lives as long as its longest pause: a short one must not cut it.
if redis.call('TTL', KEYS[1]) < tonumber(ARGV[4]) then redis.call('EXPIRE', KEYS[1], ARGV[4]) end
-- Announced at once to the workers listening: none waits for its next read.
-- pcall: a server whose ACL forbids the channel still takes the pause (the peers read it at their next read).
redis.pcall(ARGV[6], ARGV[5], ARGV[2] .. ' ' .. ARGV[1])
return 1
