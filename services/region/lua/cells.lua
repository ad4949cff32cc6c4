-- Writing cells (last-writer-wins by label) and counters' partial sums; every change is kept
-- as a version too (versions.lua).

local function put_value(dkey, ikey, column, ts, src, value, stamp)
  local cell = I(ts) .. '|' .. src .. '|v|' .. value
  local stored = redis.call('HGET', dkey, column)
  keep_version(dkey, 'c', column, cell, stamp, stored)
  if stored_is_newer(stored, ts, src) then return end
  redis.call('HSET', dkey, column, cell)
  redis.call('ZADD', ikey, 0, column)
end

local function put_tombstone(dkey, ikey, column, ts, src, stamp)
  local cell = I(ts) .. '|' .. src .. '|t|'
  local stored = redis.call('HGET', dkey, column)
  keep_version(dkey, 'c', column, cell, stamp, stored)
  if stored_is_newer(stored, ts, src) then return end
  redis.call('HSET', dkey, column, cell)
  redis.call('ZREM', ikey, column)
end

-- Sets one region's partial sum of a counter column if the label is newer than the stored one.
local function put_partial(dkey, ikey, ckey, column, region, ts, src, partial, stamp)
  local field = region .. '|' .. column
  local counter_cell = I(ts) .. '|' .. src .. '|c|'
  local cur = redis.call('HGET', ckey, field)
  keep_version(dkey, 'p', field, I(ts) .. '|' .. src .. '|' .. partial, stamp, cur)
  keep_version(dkey, 'c', column, counter_cell, stamp, redis.call('HGET', dkey, column))
  if cur then
    local cts, csrc = string.match(cur, '^(%d+)|([^|]*)|')
    cts = tonumber(cts)
    if cts > ts or (cts == ts and csrc >= src) then return end
  end
  redis.call('HSET', ckey, field, I(ts) .. '|' .. src .. '|' .. partial)
  -- A newer cell keeps its place in the index (none for a tombstone): an older partial sum
  -- arriving after a delete must not put the deleted column back into slices.
  if not stored_is_newer(redis.call('HGET', dkey, column), ts, src) then
    redis.call('HSET', dkey, column, counter_cell)
    redis.call('ZADD', ikey, 0, column)
  end
end

local function partial_of(ckey, region, column)
  local cur = redis.call('HGET', ckey, region .. '|' .. column)
  if not cur then return 0 end
  return tonumber(string.match(cur, '|(-?%d+)$'))
end

-- Applies the replicated ops of one update found at args[p..]; returns the index after them.
-- kind 's' value, 'd' tombstone, 'p' the origin region's new partial counter sum.
-- stamp: when it becomes visible here (versions.lua).
local function put_op(dkey, ikey, ckey, kind, column, arg, origin_region, ts, src, stamp)
  if kind == 's' then
    put_value(dkey, ikey, column, ts, src, arg, stamp)
  elseif kind == 'd' then
    put_tombstone(dkey, ikey, column, ts, src, stamp)
  else
    put_partial(dkey, ikey, ckey, column, origin_region, ts, src, arg, stamp)
  end
end

local function apply_ops(args, dkey, ikey, ckey, origin_region, ts, src, p, nops, stamp)
  for o = 1, nops do
    put_op(dkey, ikey, ckey, args[p], args[p + 1], args[p + 2], origin_region, ts, src, stamp)
    p = p + 3
  end
  fold_versions(dkey)
  return p
end
