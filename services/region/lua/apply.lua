-- Remote proxy APPLY (services only): remote updates of one origin gear, exactly once, in the
-- given order.
-- keys: per row of each update: data hash, column index, counters.
-- args: origin_gear, origin_region, through_ts, n, then per update: ts, src, n_rows, then per
--       row: n_ops, then per op: kind ('s' value, 'd' tombstone, 'p' partial counter sum), column,
--       arg. An update's rows become visible together (one call), at one stamp (versions.lua).
-- Returns the ts of every update applied (those at or below the stored position are skipped).
local function gear_apply(keys, args)
  local origin, origin_region = args[1], args[2]
  local through, n = tonumber(args[3]), tonumber(args[4])
  local position = tonumber(redis.call('HGET', POSITION_KEY, origin) or '0')
  local applied = {}
  local a, k = 5, 1
  for u = 1, n do
    local ts, src, nrows = tonumber(args[a]), args[a + 1], tonumber(args[a + 2])
    local p = a + 3
    local fresh = ts > position
    local stamp = fresh and next_stamp(ts)
    for _ = 1, nrows do
      local nops = tonumber(args[p])
      if fresh then
        p = apply_ops(args, keys[k], keys[k + 1], keys[k + 2], origin_region, ts, src, p + 1, nops, stamp)
      else
        p = p + 1 + 3 * nops
      end
      k = k + 3
    end
    if fresh then applied[#applied + 1] = ts end
    a = p
  end
  if through > position then redis.call('HSET', POSITION_KEY, origin, I(through)) end
  return applied
end
