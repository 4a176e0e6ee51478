-- Reserve the next start of a paced origin on Redis's clock, so that workers
-- on different machines agree: no earlier than *lead* from now (the
-- answer's way back), *spacing* after the last reserved start, and the
-- worker's own floor (a lost or unreadable "next" gives no turn at once);
-- *count* turns in a row. Returns {first start, Redis's now, problem or ''}.
-- KEYS: next. ARGV: spacing, lead, the farthest believable start from now,
-- count, floor.
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local spacing, lead, horizon = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local count, floor = tonumber(ARGV[4]) or 1, tonumber(ARGV[5]) or 0
local raw = redis.pcall('GET', KEYS[1])
local after, problem = 0, ''
if type(raw) == 'table' then
  problem = 'next start is not a string; ignored'
elseif raw then
  after = number(raw)
  if not after or after > now + horizon then
    problem = 'next start ' .. string.sub(raw, 1, 40) .. ' is not a believable time; ignored'
    after = 0
  end
end
local start = math.max(now + lead, after, floor)
local next = start + count * spacing
redis.call('SET', KEYS[1], string.format('%.6f', next), 'PX', math.ceil((next - now) * 1000) + 60000)
return {string.format('%.6f', start), string.format('%.6f', now), problem}
