-- The outcome and expiry of the state under *key*, when it is one: a string
-- no larger than any worker writes, of an outcome we write. "read", "claim"
-- and "keep" must agree on which states count.
local function header(key, limit)
  if redis.call('TYPE', key).ok ~= 'string' or redis.call('STRLEN', key) > limit then return nil end
  local outcome, expires = string.match(redis.call('GETRANGE', key, 0, 63), '^(%l+) ([^\n]*)\n')
  if outcome ~= 'rules' and outcome ~= 'unrestricted' and outcome ~= 'unavailable' then return nil end
  return outcome, number(expires)
end
