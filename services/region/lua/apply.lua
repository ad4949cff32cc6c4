-- Remote proxy APPLY: remote updates of one origin gear, exactly once, in the given order.
-- KEYS: position hash, then per update: data hash, column index, counters.
-- ARGV: origin_gear, origin_region, through_ts, n, then per update: ts, src, n_ops, then per op:
--       kind ('s' value, 'd' tombstone, 'p' partial counter sum), column, arg.
-- Returns the ts of every update applied (those at or below the stored position are skipped).
local origin, origin_region = ARGV[1], ARGV[2]
local through, n = tonumber(ARGV[3]), tonumber(ARGV[4])
local position = tonumber(redis.call('HGET', KEYS[1], origin) or '0')
local applied = {}
local a, k = 5, 2
for u = 1, n do
  local ts, src, nops = tonumber(ARGV[a]), ARGV[a + 1], tonumber(ARGV[a + 2])
  local p = a + 3
  if ts > position then
    p = apply_ops(KEYS[k], KEYS[k + 1], KEYS[k + 2], origin_region, ts, src, p, nops)
    applied[#applied + 1] = ts
  else
    p = p + 3 * nops
  end
  a, k = p, k + 3
end
if through > position then redis.call('HSET', KEYS[1], origin, I(through)) end
return applied
