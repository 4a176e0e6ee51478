-- Replace the state (whatever type the key had) and drop the fetch lock.
-- KEYS: state, fetching. ARGV: the state ("outcome expires_at\n" payload), ttl seconds.
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
redis.call('DEL', KEYS[2])
return 1
