-- The origin's state: {Redis's clock (seconds, microseconds), the key's type,
-- and for a string its value}; a string larger than any worker writes is
-- 'oversized', never sent whole.
-- KEYS: state. ARGV: the most bytes a state may hold.
local t = redis.call('TIME')
local kind = redis.call('TYPE', KEYS[1]).ok
if kind ~= 'string' then return {t[1], t[2], kind} end
if redis.call('STRLEN', KEYS[1]) > tonumber(ARGV[1]) then return {t[1], t[2], 'oversized'} end
return {t[1], t[2], kind, redis.call('GET', KEYS[1])}
