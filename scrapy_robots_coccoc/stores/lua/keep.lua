-- A failed refresh keeps the stored rules: only the expiry moves (and the
-- fetch lock goes). Nothing stored: nothing to keep.
-- KEYS: state, fetching. ARGV: expires_at, ttl seconds.
redis.call('DEL', KEYS[2])
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return 0 end
redis.call('HSET', KEYS[1], 'expires_at', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
