-- Whether the state hash holds no field larger than any worker writes:
-- "read" and "claim" must agree on which states count.
local function fits(key, limit)
  for _, field in ipairs({'outcome', 'body', 'expires_at'}) do
    if redis.call('HSTRLEN', key, field) > limit then return false end
  end
  return true
end
