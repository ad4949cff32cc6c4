-- Shared by every gear: cells, LWW by label, counters.
-- A cell is the string "ts|src|flag|value": flag 'v' value, 't' tombstone, 'c' counter column.
-- Counter partial sums live in a hash field "<region>|<column>" as "ts|src|partial".

-- Integers (microsecond timestamps) as digits: Lua would print large numbers as 1.7e+15.
local function I(x) return string.format("%d", x) end

-- The store's clock, plus the shard's CLOCK_KEY offset (µs, either way) where one is set: the
-- clock nemesis skews a region's clock with it and makes it jump back. Every ts a gear makes is
-- also above the gear's last (last_ts + 1), so a clock that goes back changes no order.
local function now_us()
  local t = redis.call('TIME')
  local offset = tonumber(redis.call('GET', CLOCK_KEY) or '0')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) + offset
end

-- The ts of a label this gear makes: the least at or above `at_least` that falls to this shard
-- modulo the region's shards, so that no two gears of a region ever make labels of one ts. A
-- region's labels are told apart by ts alone wherever they meet: a receiver's watermark per
-- origin region (one label at the watermark is taken as delivered), bulk transfer's positions,
-- the per-shard exactly-once checks. Two shards of a region once gave one microsecond to two
-- writes; receivers delivered the first and dropped the second as a duplicate, everywhere.
local function own_ts(cfg, at_least)
  local shards = tonumber(cfg.shards or '1')
  if shards <= 1 then return at_least end
  return at_least + (tonumber(cfg.shard) - at_least % shards) % shards
end

-- A label's kind: 'u' update, 'm' migration; in capitals while the region's proxy
-- has applied remote updates outside the tree's order whose labels have not all reached it yet
-- (the gear's OUTSIDE_ORDER_FIELD is set, services/saturn/proxy.py): such a label could overtake
-- the labels of what its client saw, so its receivers wait until it is stable in timestamp order.
local function label_kind(kind, outside)
  if outside == '1' then return string.upper(kind) end
  return kind
end

-- (the shard's tag right after the prefix, so that the keys derived below carry it too)
local function row_keys(group, row)
  local name = SHARD .. group .. ':' .. row
  return 'd:' .. name, 'i:' .. name, 'c:' .. name
end

-- Cure's dependencies of a row: the entry-by-entry maximum of the vectors of every update
-- applied to it (its writer's vector, and its own region's ts), "region:ts" pairs. A reader
-- takes it into its own vector, so a vector covers the whole causal past of what was read,
-- also of updates not replicated where it was read (per row, not per cell: coarser, never
-- less). Only under cure (services/protocols/cure.py).
local function deps_key(dkey) return 'v:' .. string.sub(dkey, 3) end

local function merge_deps(dkey, deps_text, region, ts)
  local vkey = deps_key(dkey)
  local merged = {}
  for _, text in ipairs({redis.call('GET', vkey) or '', deps_text}) do
    for r, t in string.gmatch(text, '([^%s:]+):(%d+)') do
      t = tonumber(t)
      if t > (merged[r] or 0) then merged[r] = t end
    end
  end
  if ts > (merged[region] or 0) then merged[region] = ts end
  local parts = {}
  for r, t in pairs(merged) do parts[#parts + 1] = r .. ':' .. I(t) end
  table.sort(parts)
  redis.call('SET', vkey, table.concat(parts, ' '))
end

local function parse_cell(cell)
  local ts, src, flag = string.match(cell, '^(%d+)|([^|]*)|(%a)|')
  return tonumber(ts), src, flag
end

-- true when the stored label (ts, src) is newer than (ts2, src2): the incoming write loses.
local function stored_is_newer(stored, ts2, src2)
  if not stored then return false end
  local ts, src = parse_cell(stored)
  if ts ~= ts2 then return ts > ts2 end
  return src > src2
end
