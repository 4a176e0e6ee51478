-- The origin's state: {Redis's clock (seconds, microseconds), the key's type,
-- and for a hash {outcome, body, expires_at}}; a hash with a field larger
-- than any worker writes is 'oversized', never sent whole.
-- KEYS: state. ARGV: the most bytes a field may hold.
local t = redis.call('TIME')
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'hash' then return {t[1], t[2], kind} end
if not fits(KEYS[1], tonumber(ARGV[1])) then return {t[1], t[2], 'oversized'} end
return {t[1], t[2], kind, redis.call('HMGET', KEYS[1], 'outcome', 'body', 'expires_at')}
