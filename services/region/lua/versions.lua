-- Versions and the shard's clock: what read-only transactions read "as of" a time (txn.lua,
-- read.lua; the algorithm is causal_client/transactions.py's).
--
-- Every change to a row (a local write, a remote update, a transaction's part) becomes visible at
-- a *stamp* of this shard's clock (GEAR_KEY's last_ts, which labels made here also come from): a
-- local write at its own ts, anything else at a stamp above the clock. The clock never goes back,
-- so a read that saw the shard at clock c knows that no later change will have a stamp at or below
-- c, except a transaction already staged here (its part is stamped with its commit time, which is
-- at least the proposal the stage made): reads report those (pending, txn.lua).
--
-- Each change is also kept as a version in the row's history (a sorted set scored by stamp, member
-- "<kind><name length>:<name><cell>", kind 'c' a cell, 'p' a counter's partial sum) for RETAIN_US.
-- The state of a cell at time t is the last-writer-wins maximum of its versions stamped at or below
-- t: order-independent, so a part stamped below changes applied before it is still placed right.
-- The row's base hash stands for everything before the history: a field's first version in it
-- brings along the field's value before that change (ABSENT: none), and versions older than
-- RETAIN_US fold into it (their maximum per cell). Both keys expire 2 * RETAIN_US after the row's last
-- change: by then every version is older than any time a read may ask for, and the row's current
-- state is its state at every such time.

local ABSENT = ''  -- in a base hash: the field had no value before its history
local function hist_key(dkey) return 'h:' .. string.sub(dkey, 3) end
local function base_key(dkey) return 'b:' .. string.sub(dkey, 3) end

local function clock()
  return tonumber(redis.call('HGET', GEAR_KEY, 'last_ts') or '0')
end

-- Moves the clock up to t (never down).
local function raise_clock(t)
  if t > clock() then redis.call('HSET', GEAR_KEY, 'last_ts', I(t)) end
end

-- A stamp for a change that is not a local write: above the clock, the physical time and floor.
local function next_stamp(floor)
  local stamp = math.max(clock() + 1, now_us(), floor or 0)
  redis.call('HSET', GEAR_KEY, 'last_ts', I(stamp))
  return stamp
end

local function version_member(kind, name, cell)
  return kind .. #name .. ':' .. name .. cell
end

-- The base hash's field (kind .. name) and the cell of a history member.
local function split_version(member)
  local len, rest = string.match(member, '^.(%d+):()')
  local stop = rest + tonumber(len)
  return string.sub(member, 1, 1) .. string.sub(member, rest, stop - 1), string.sub(member, stop)
end

-- Whether cell a beats cell b (nil: none) under last-writer-wins: greater (ts, src). Cells and
-- partial sums both start "ts|src|".
local function lww_beats(a, b)
  if not b or b == ABSENT then return true end
  local ats, asrc = string.match(a, '^(%d+)|([^|]*)|')
  local bts, bsrc = string.match(b, '^(%d+)|([^|]*)|')
  ats, bts = tonumber(ats), tonumber(bts)
  if ats ~= bts then return ats > bts end
  return asrc > bsrc
end

-- before: the field's value before this change (nil: none), the base's if it has none yet.
local function keep_version(dkey, kind, name, cell, stamp, before)
  redis.call('HSETNX', base_key(dkey), kind .. name, before or ABSENT)
  redis.call('ZADD', hist_key(dkey), 'NX', stamp, version_member(kind, name, cell))
end

-- After a row changed: versions older than RETAIN_US fold into its base; both keys live on.
local function fold_versions(dkey)
  local hkey, bkey = hist_key(dkey), base_key(dkey)
  local horizon = now_us() - RETAIN_US
  local old = redis.call('ZRANGEBYSCORE', hkey, '-inf', '(' .. I(horizon), 'LIMIT', 0, 64)
  if #old > 0 then
    for _, member in ipairs(old) do
      local key, cell = split_version(member)
      if lww_beats(cell, redis.call('HGET', bkey, key)) then redis.call('HSET', bkey, key, cell) end
    end
    redis.call('ZREM', hkey, unpack(old))
  end
  local ttl = math.floor(2 * RETAIN_US / 1000)
  redis.call('PEXPIRE', hkey, ttl)
  redis.call('PEXPIRE', bkey, ttl)
end

-- The earliest time from which the row's current state is known to be valid (an upper bound of
-- its cells' stamps: safe, a later start only narrows the interval a read claims).
local function row_evt(dkey)
  local top = redis.call('ZREVRANGEBYSCORE', hist_key(dkey), '+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if top[2] then return tonumber(top[2]) end
  return now_us() - 2 * RETAIN_US
end

-- The row as of stamp t: nil when no version is stamped after t (the current state is the state
-- at t), else a table field ('c'/'p' .. name) -> the cell at t (false: none), for the fields that
-- changed after t.
local function changes_after(dkey, t)
  local hkey = hist_key(dkey)
  local late = redis.call('ZRANGEBYSCORE', hkey, '(' .. I(t), '+inf')
  if #late == 0 then return nil end
  local at = {}
  for _, member in ipairs(late) do
    at[(split_version(member))] = false
  end
  local bkey = base_key(dkey)
  for key in pairs(at) do
    local base = redis.call('HGET', bkey, key)
    at[key] = (base and base ~= ABSENT) and base or false
  end
  for _, member in ipairs(redis.call('ZRANGEBYSCORE', hkey, '-inf', I(t))) do
    local key, cell = split_version(member)
    if at[key] ~= nil and lww_beats(cell, at[key] or nil) then at[key] = cell end
  end
  return at
end
