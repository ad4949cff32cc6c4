-- Remote proxy APPLY (services only): remote updates of one origin gear, exactly once, in the
-- given order.
-- keys: per update: data hash, column index, counters.
-- args: origin_gear, origin_region, through_ts, n, then per update: ts, src, n_ops, then per op:
--       kind ('s' value, 'd' tombstone, 'p' partial counter sum), column, arg.
-- Returns the ts of every update applied (those at or below the stored position are skipped).
local function gear_apply(keys, args)
  local origin, origin_region = args[1], args[2]
  local through, n = tonumber(args[3]), tonumber(args[4])
  local position = tonumber(redis.call('HGET', POSITION_KEY, origin) or '0')
  local applied = {}
  local a, k = 5, 1
  for u = 1, n do
    local ts, src, nops = tonumber(args[a]), args[a + 1], tonumber(args[a + 2])
    local p = a + 3
    if ts > position then
      p = apply_ops(args, keys[k], keys[k + 1], keys[k + 2], origin_region, ts, src, p, nops)
      applied[#applied + 1] = ts
    else
      p = p + 3 * nops
    end
    a, k = p, k + 3
  end
  if through > position then redis.call('HSET', POSITION_KEY, origin, I(through)) end
  return applied
end
