-- Claim the origin's fetch (1) unless a fresh state is stored (one the
-- caller could read) or a peer holds the lock (0). A lock without expiry is
-- taken over (2); one longer than ours is cut to ours, so that every lock ends.
-- Returns {that, Redis's clock (seconds, microseconds)}.
-- KEYS: state, fetching. ARGV: now, lock milliseconds, the longest
-- believable lifetime, the most bytes a state may hold, the worker's token,
-- "1" if the caller found the stored state unreadable.
local t = redis.call('TIME')
local function claim()
  local now = tonumber(ARGV[1])
  local outcome, expires = header(KEYS[1], tonumber(ARGV[4]))
  if outcome and ARGV[6] ~= '1' and expires and expires > now and expires <= now + tonumber(ARGV[3]) then
    return 0
  end
  if redis.call('SET', KEYS[2], ARGV[5], 'NX', 'PX', ARGV[2]) then return 1 end
  local ttl = redis.call('PTTL', KEYS[2])
  if ttl == -1 then
    redis.call('SET', KEYS[2], ARGV[5], 'PX', ARGV[2])
    return 2
  end
  if ttl > tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
  return 0
end
return {claim(), t[1], t[2]}
