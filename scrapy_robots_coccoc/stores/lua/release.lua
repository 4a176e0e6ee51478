-- A fetch ended with nothing to store: its lock goes, if it is still this
-- worker's (it may have expired and passed to a peer).
-- KEYS: fetching. ARGV: the worker's token.
if redis.call('TYPE', KEYS[1]).ok ~= 'string' or redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
