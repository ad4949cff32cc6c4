-- Remote proxy DELIVER (saturn, services only): make a run of labelled updates visible, in
-- Saturn's order, and raise the per-origin watermarks. Exactly once: an update at or below its
-- origin's watermark on this shard (as it was when the call began) was applied before and is
-- skipped. On shard 0 the watermarks are the proxy's: attaches wait on them and bulk transfer
-- resumes from them. When a watermark rises, an entry goes to the events stream (capped), on
-- which attaches that wait for the watermarks block (XREAD) instead of polling them.
-- keys: per row of each update: data hash, column index, counters.
-- args: floor (every stamp goes above it: the applier's last stamp on another shard, so that an
--       update applied after another is stamped after it, whatever the shards' clocks), n_updates,
--       then per update: ts, src, origin_region, deps (Cure's vector of the update,
--       "" under other protocols: common.lua's merge_deps), n_rows, then per row: n_ops, then per
--       op: kind, column, arg; then n_marks, then per mark: origin_region, ts. An update's rows
--       become visible at one stamp (versions.lua).
-- Returns {the greatest stamp given (or floor), then "src|ts" of each update applied}.
local function gear_deliver(keys, args)
  local floor, n = tonumber(args[1]), tonumber(args[2])
  local applied = {floor}
  local through = {}
  local a, k = 3, 1
  for u = 1, n do
    local ts, src, origin, deps, nrows = tonumber(args[a]), args[a + 1], args[a + 2], args[a + 3], tonumber(args[a + 4])
    local p = a + 5
    if through[origin] == nil then
      through[origin] = tonumber(redis.call('HGET', WATERMARK_KEY, origin) or '0')
    end
    local fresh = ts > through[origin]
    local stamp = fresh and next_stamp(math.max(ts, floor + 1))
    if stamp then floor = stamp; applied[1] = stamp end
    for _ = 1, nrows do
      local nops = tonumber(args[p])
      if fresh then
        p = apply_ops(args, keys[k], keys[k + 1], keys[k + 2], origin, ts, src, p + 1, nops, stamp)
        if deps ~= '' then merge_deps(keys[k], deps, origin, ts) end
      else
        p = p + 1 + 3 * nops
      end
      k = k + 3
    end
    if fresh then applied[#applied + 1] = src .. '|' .. I(ts) end
    a = p
  end
  local marks = tonumber(args[a])
  local raised = false
  for m = 1, marks do
    local origin, ts = args[a + 2 * m - 1], tonumber(args[a + 2 * m])
    local cur = tonumber(redis.call('HGET', WATERMARK_KEY, origin) or '0')
    if ts > cur then
      redis.call('HSET', WATERMARK_KEY, origin, I(ts))
      raised = true
    end
  end
  if raised then
    redis.call('XADD', WATERMARK_EVENTS, 'MAXLEN', '~', WATERMARK_EVENTS_MAXLEN, '*', 'r', '')
  end
  return applied
end

-- Remote proxy OUTSIDE ORDER (saturn, services only): args: '1' while the labels this gear makes
-- must be marked (common.lua's label_kind), '0' when no longer.
local function gear_outside_order(keys, args)
  redis.call('HSET', GEAR_KEY, OUTSIDE_ORDER_FIELD, args[1])
  return 1
end
