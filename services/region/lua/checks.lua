-- The checks every client-facing gear makes before it touches data, so that no client can skip
-- them: the caller's API version, its label, names and sizes, where rows live. A failed check
-- raises {err = '<CODE> <message>'} (see fail); `guarded` turns it into an error reply.
-- The region's settings are in CONFIG_KEY (a hash written at start from the topology):
-- region, gear, shard, shards, protocol, max_value, regions (space-separated, in order), and the
-- protocol's traits (services/traits.py) the gears act on: emits, vectors, attach, migration_label,
-- labels_in_bulk (a label rides in its write's bulk entry: gears.labels_stream);
-- GROUPS_KEY maps each group to its replicas (space-separated); GEARS_KEY is every gear's id.

local function fail(code, message) error({err = code .. ' ' .. message}) end

-- Every call names its shard: its first key is the shard's hash tag ("{...}"), which every key
-- of the shard carries (gears.py, enter_shard). The gear gets the keys after it.
local function enter_call_shard(keys)
  local tag = keys[1]
  if tag == nil or not string.match(tag, '^{[^{}]+}$') then
    fail(CODE_INVALID, "a gear call names its shard: its first key is the shard's hash tag, as '{s0.1}' (got "
      .. (tag and ("'" .. tag .. "'") or 'no key') .. ')')
  end
  enter_shard(tag)
  table.remove(keys, 1)
  -- A shard being moved to another master is fenced (store_cluster.py): no call touches its keys
  -- while they are split between two nodes (callers try again; services wait).
  if redis.call('HGET', CONFIG_KEY, MOVING_FIELD) then
    fail(CODE_MOVING, 'shard ' .. tag .. ' is moving to another master of its region: try again shortly')
  end
end

-- The region's own services' gears (unguarded: their errors are bugs, not a caller's mistakes).
local function sharded(gear)
  return function(keys, args)
    enter_call_shard(keys)
    return gear(keys, args)
  end
end

-- Runs a gear in its call's shard, returning a failed check as an error reply (never a half-done
-- write: every gear checks everything before its first write).
local function guarded(gear)
  return function(keys, args)
    local ok, result = pcall(function() enter_call_shard(keys); return gear(keys, args) end)
    if ok then return result end
    if type(result) == 'table' and result.err then return redis.error_reply(result.err) end
    return redis.error_reply('ERR ' .. tostring(result))
  end
end

local function q(s) return "'" .. s .. "'" end

local function words(s)
  local out = {}
  for w in string.gmatch(s or '', '%S+') do out[#out + 1] = w end
  return out
end

local function config()
  local flat = redis.call('HGETALL', CONFIG_KEY)
  if #flat == 0 then
    fail(CODE_UNCONFIGURED, 'this store has no region settings for shard ' .. SHARD
      .. ' yet (starting, or the shard is on another store)')
  end
  local cfg = {}
  for i = 1, #flat, 2 do cfg[flat[i]] = flat[i + 1] end
  return cfg
end

local function check_api(version)
  if version ~= API then
    fail(CODE_VERSION, 'the region runs gears API ' .. API .. ', the client speaks ' .. tostring(version)
      .. ': upgrade whichever is older')
  end
end

local CRC = nil  -- built on first use: the bit library is not there while a library loads

local function crc_table()
  local t = {}
  for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
      if bit.band(c, 1) == 1 then c = bit.bxor(bit.rshift(c, 1), 0xEDB88320) else c = bit.rshift(c, 1) end
    end
    t[i] = c
  end
  return t
end

-- zlib's CRC-32, unsigned: the hash every client and gear routes rows and claims with.
local function crc32(s)
  CRC = CRC or crc_table()
  local crc = bit.bnot(0)
  for i = 1, #s do
    crc = bit.bxor(bit.rshift(crc, 8), CRC[bit.band(bit.bxor(crc, string.byte(s, i)), 0xFF)])
  end
  crc = bit.bnot(crc)
  if crc < 0 then crc = crc + 4294967296 end
  return crc
end

-- The label a call carries at args[p..p+4] (type, ts, src, target, vector), checked: returns
-- ts, src, type, target and the vector (region -> ts; empty but under Cure); the zero label is
-- (0, ''). The vector is "region:ts" pairs separated by spaces, of known regions only.
local function check_vector(cfg, text)
  local vector = {}
  if text == '' then return vector end
  local known = {}
  for _, r in ipairs(words(cfg.regions)) do known[r] = true end
  for entry in string.gmatch(text, '%S+') do
    local region, ts_text = string.match(entry, '^([^:]+):(%d+)$')
    if region == nil or #ts_text > 17 then fail(CODE_LABEL, 'label: bad vector entry ' .. q(entry)) end
    if not known[region] then fail(CODE_LABEL, 'label: vector names unknown region ' .. q(region)) end
    vector[region] = tonumber(ts_text)
  end
  return vector
end

local function check_label(cfg, args, p)
  local kind, ts_text, src, target, vector_text = args[p], args[p + 1], args[p + 2], args[p + 3], args[p + 4]
  if vector_text == nil then
    fail(CODE_INVALID, 'a call needs the session label (type, ts, src, target, vector)')
  end
  if not string.match(ts_text, '^%d+$') then
    fail(CODE_LABEL, 'label: label timestamp must be >= 0, got ' .. ts_text)
  end
  if kind ~= '0' and kind ~= '1' then fail(CODE_LABEL, 'label: unknown label type ' .. kind) end
  local ts = tonumber(ts_text)
  local vector = check_vector(cfg, vector_text)
  if ts == 0 and src == '' then return 0, '', kind, target, vector end
  if not string.find(src, '/', 1, true) then
    fail(CODE_LABEL, "label: label source must look like 'region/shard', got " .. q(src))
  end
  if #target > MAX_TARGET_BYTES then
    fail(CODE_LABEL, 'label: label target longer than ' .. MAX_TARGET_BYTES .. ' bytes')
  end
  if redis.call('SISMEMBER', GEARS_KEY, src) == 0 then
    fail(CODE_LABEL, 'label: unknown source gear ' .. q(src))
  end
  local ahead = ts / 1e6 - now_us() / 1e6
  if ahead > MAX_FUTURE_S then
    fail(CODE_LABEL, string.format('label: timestamp is %.0f s in the future', ahead))
  end
  return ts, src, kind, target, vector
end

local function check_name(what, value)
  if value == nil or value == '' then fail(CODE_INVALID, what .. ' must not be empty') end
  if #value > MAX_KEY_BYTES then fail(CODE_INVALID, what .. ' longer than ' .. MAX_KEY_BYTES .. ' bytes') end
end

-- A whole number written in digits (no sign, fraction, exponent or hex), or nil.
local function whole(text)
  if type(text) ~= 'string' or not string.match(text, '^%d+$') or #text > 15 then return nil end
  return tonumber(text)
end

-- A time in µs (as labels carry them: up to 17 digits), or nil.
local function whole_time(text)
  if type(text) ~= 'string' or not string.match(text, '^%d+$') or #text > 17 then return nil end
  return tonumber(text)
end

-- Every argument was read: a caller that sends more than it describes has a bug; refuse it
-- rather than drop what it meant.
local function check_consumed(args, next_index)
  if next_index ~= #args + 1 then
    fail(CODE_INVALID, 'the call has ' .. #args .. ' arguments, its counts describe ' .. (next_index - 1))
  end
end

local function owns_row(cfg, group, row)
  local shards = tonumber(cfg.shards)
  return shards == 1 or crc32(group .. '/' .. row) % shards == tonumber(cfg.shard)
end

-- The group is replicated here, and the row is this shard's (any shard's with any_shard: the
-- coordinator of a transaction ships the other shards' rows too): returns the group's replicas.
local function check_row(cfg, group, row, any_shard)
  if group == nil or group == '' then fail(CODE_INVALID, 'group must not be empty') end
  local members = redis.call('HGET', GROUPS_KEY, group)
  if not members then fail(CODE_INVALID, 'unknown group ' .. q(group)) end
  local replicas = words(members)
  local here = false
  for _, r in ipairs(replicas) do if r == cfg.region then here = true end end
  if not here then
    fail(CODE_NOTHERE, 'group ' .. q(group) .. ' is not replicated at region ' .. q(cfg.region)
      .. ' (replicas: ' .. table.concat(replicas, ',') .. ')')
  end
  check_name('row key', row)
  local shards = tonumber(cfg.shards)
  if shards > 1 and not any_shard and not owns_row(cfg, group, row) then
    fail(CODE_WRONGSHARD, 'row ' .. q(row) .. ' of group ' .. q(group) .. ' belongs to another shard of '
      .. cfg.region .. ' than ' .. cfg.gear)
  end
  return replicas
end

local function check_region(cfg, name)
  for _, r in ipairs(words(cfg.regions)) do if r == name then return end end
  fail(CODE_UNKNOWNREGION, 'unknown region ' .. q(name))
end
