-- Remote proxy STASH (saturn): keep payloads until Saturn delivers their labels, exactly once.
-- KEYS: position hash, pending hash. ARGV: origin_gear, through_ts, n, then per payload: ts, body.
-- Returns the ts of every payload stashed (those at or below the stored position are skipped).
local origin, through, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local position = tonumber(redis.call('HGET', KEYS[1], origin) or '0')
local stashed = {}
for u = 1, n do
  local ts, body = tonumber(ARGV[2 + 2 * u]), ARGV[3 + 2 * u]
  if ts > position then
    redis.call('HSET', KEYS[2], origin .. '|' .. I(ts), body)
    stashed[#stashed + 1] = ts
  end
end
if through > position then redis.call('HSET', KEYS[1], origin, I(through)) end
return stashed
