-- Replace the state (whatever type the key had) and drop the fetch lock.
-- KEYS: state, fetching. ARGV: outcome, body, expires_at, ttl seconds.
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'outcome', ARGV[1], 'body', ARGV[2], 'expires_at', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('DEL', KEYS[2])
return 1
