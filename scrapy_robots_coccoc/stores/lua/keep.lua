-- A failed refresh keeps the stored rules: only the expiry moves (and the
-- fetch lock goes). Nothing readable stored: nothing to keep.
-- KEYS: state, fetching. ARGV: expires_at, ttl seconds, the most bytes a state may hold.
redis.call('DEL', KEYS[2])
local outcome, expires = header(KEYS[1], tonumber(ARGV[3]))
if not (outcome and expires) then return 0 end
local value = redis.call('GET', KEYS[1])
local rest = string.sub(value, (string.find(value, '\n', 1, true)))
redis.call('SET', KEYS[1], outcome .. ' ' .. ARGV[1] .. rest, 'EX', ARGV[2])
return 1
