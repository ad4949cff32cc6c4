-- Strongly consistent registers: one replica's part of Vivace's algorithms (the client runs the
-- phases, causal_client/strong.py). A register (namespace, key) lives at every region, on the
-- shard crc32(namespace \0 key) picks, as one hash:
--   ts   the greatest timestamp stored here (a write's timestamp phase, a read's write-back, a
--        read-modify-write's commit);
--   ots  the greatest read-modify-write promise made here (its ordering phase);
--   last the last timestamp this replica handed out (stamps are unique);
--   v:TS the value written at TS: every one of the last RETAIN_VERSIONS_US below `ts` (a reader
--        whose majority's greatest timestamp is older than this replica's may ask for it), and
--        newer ones whose timestamps are not stored yet.
-- A timestamp is '<16-digit microseconds>.<region>': string order is (time, region) order.
-- Nothing below a promise is stored: a write or write-back under it is refused (the client
-- tries again above it), so that a read-modify-write never commits over a value it did not read.
local MAX_STRONG_VALUE_BYTES = 16384
local RETAIN_VERSIONS_US = 10000000

local function strong_key(cfg, namespace, key)
  check_part('register namespace', namespace)
  check_part('register key', key)
  local shards = tonumber(cfg.shards)
  if shards > 1 and crc32(namespace .. '\0' .. key) % shards ~= tonumber(cfg.shard) then
    fail(CODE_WRONGSHARD, 'register ' .. namespace .. '/' .. key .. ' belongs to another shard of '
      .. cfg.region)
  end
  return STRONG_PREFIX .. namespace .. '\0' .. key
end

-- Every register gear's prologue: the API version, the register's hash name, the argument count
-- (`count`, the api included). Returns the region's settings and the name.
local function register_call(args, count)
  check_api(args[1])
  local cfg = config()
  local name = strong_key(cfg, args[2], args[3])
  check_consumed(args, count + 1)
  return cfg, name
end

local function check_ts(ts, what)
  if ts == '' then return ts end
  local micros, region = string.match(ts or '', '^(%d+)%.(.+)$')
  if micros == nil or #micros ~= 16 or string.find(region, '[%s%z]') then
    fail(CODE_INVALID, what .. " must look like '<16 digits>.<region>', got " .. q(tostring(ts)))
  end
  return ts
end

local function check_strong_value(value)
  if value == nil or #value > MAX_STRONG_VALUE_BYTES or string.find(value, '[%z\1-\31\127]') then
    fail(CODE_INVALID, 'a register value must be printable text of at most ' .. MAX_STRONG_VALUE_BYTES .. ' bytes')
  end
end

local function later(a, b) if (a or '') > (b or '') then return a or '' end return b or '' end

local function micros_of(ts) return tonumber(string.match(ts, '^(%d+)')) end

-- Versions well below the stored timestamp are asked for no more: a reader asks for the greatest
-- timestamp a majority stores, which lags a replica's by at most the operations in flight.
local function trim_versions(name, stored)
  local horizon = string.format('%016d', micros_of(stored) - RETAIN_VERSIONS_US)
  local fields = redis.call('HKEYS', name)
  for _, field in ipairs(fields) do
    if string.sub(field, 1, 2) == 'v:' and string.sub(field, 3) < horizon then redis.call('HDEL', name, field) end
  end
end

-- A fresh timestamp above everything this replica has seen and above `floor`.
local function stamp(name, cfg, floor)
  local h = redis.call('HMGET', name, 'ts', 'ots', 'last')
  local top = later(later(later(h[1], h[2]), h[3]), floor)
  local micros = now_us()
  if top ~= '' then micros = math.max(micros, micros_of(top) + 1) end
  local ts = string.format('%016d', micros) .. '.' .. cfg.region
  redis.call('HSET', name, 'last', ts)
  return ts
end

-- args: api, namespace, key, floor. A fresh timestamp for a read-modify-write (its promise):
-- unique, above everything this replica has seen and above floor.
local function gear_strong_stamp(keys, args)
  local cfg, name = register_call(args, 4)
  return stamp(name, cfg, check_ts(args[4], 'floor'))
end

-- args: api, namespace, key, ts ('' = a fresh stamp above floor), value, floor. Stores the value
-- at ts, unless ts is so far below what is stored that nobody will ask for it. Returns
-- {ts, stored 1/0}.
local function gear_strong_put(keys, args)
  local cfg, name = register_call(args, 6)
  local ts, value, floor = check_ts(args[4], 'timestamp'), args[5], check_ts(args[6], 'floor')
  check_strong_value(value)
  if ts == '' then ts = stamp(name, cfg, floor) end
  local stored = redis.call('HGET', name, 'ts') or ''
  if stored ~= '' and micros_of(ts) < micros_of(stored) - RETAIN_VERSIONS_US then return {ts, 0} end
  redis.call('HSET', name, 'v:' .. ts, value)
  return {ts, 1}
end

-- args: api, namespace, key. Returns {stored ts ('' none), 1/0 whether its value is here}.
local function gear_strong_ts(keys, args)
  local _, name = register_call(args, 3)
  local stored = redis.call('HGET', name, 'ts') or ''
  local here = stored ~= '' and redis.call('HEXISTS', name, 'v:' .. stored) or 0
  return {stored, here}
end

-- args: api, namespace, key, ts, mode:
--   'w' a write's timestamp (or a read's write-back): stored if above; refused under a promise;
--   'o' a read-modify-write's promise: made if ts is above everything stored and promised;
--   'c' its commit: stored unless a greater promise was made here meanwhile.
-- Returns {accepted 1/0, stored ts, 1/0 whether the stored ts's value is here}.
local function gear_strong_set_ts(keys, args)
  local _, name = register_call(args, 5)
  local ts, mode = check_ts(args[4], 'timestamp'), args[5]
  if ts == '' then fail(CODE_INVALID, 'a timestamp phase needs a timestamp') end
  if mode ~= 'w' and mode ~= 'o' and mode ~= 'c' then
    fail(CODE_INVALID, "a timestamp phase's mode is 'w', 'o' or 'c', got " .. q(tostring(mode)))
  end
  local h = redis.call('HMGET', name, 'ts', 'ots')
  local stored, promised = h[1] or '', h[2] or ''
  local accepted = 0
  if mode == 'o' then
    if ts > stored and ts > promised then
      redis.call('HSET', name, 'ots', ts)
      accepted = 1
    end
  elseif ts >= promised then
    accepted = 1
    if ts > stored then
      stored = ts
      redis.call('HSET', name, 'ts', ts)
      trim_versions(name, ts)
    end
  end
  local here = stored ~= '' and redis.call('HEXISTS', name, 'v:' .. stored) or 0
  return {accepted, stored, here}
end

-- args: api, namespace, key, ts. Returns {value} if this replica has the value written at ts,
-- else {} (the client asks another replica).
local function gear_strong_data(keys, args)
  local _, name = register_call(args, 4)
  local value = redis.call('HGET', name, 'v:' .. check_ts(args[4], 'timestamp'))
  if not value then return {} end
  return {value}
end
