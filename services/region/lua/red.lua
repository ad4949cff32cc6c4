-- Red operations ordered by a token, Gemini's way (RedBlue, OSDI'12 §6; `[strong] mode = "token"`):
-- the region holding the token runs red operations on its own copy of the red registers and
-- numbers each one; the next holder takes every numbered operation it lacks before it runs any.
-- The client (causal_client/token.py) passes the token: the regions hold it in turn, for a slot of
-- `token_hold_ms` each; a region opens its slot by announcing it everywhere (close: nothing of an
-- older slot runs there after that) and collecting the operations it lacks (open).
-- On a region's first shard:
--   red:token         fence: the greatest slot announced here; open: the slot this region opened
--                     (it holds the token while open == fence); seq: the last operation applied
--                     here; trimmed: log entries up to it are gone (every region has them)
--   red:log           seq -> the operation's effect: namespace \0 key \0 stored value
--   red:reg:NS\0KEY   v: the stored value (strong.lua's encoding, label included), at: its seq
local MAX_RED_ENTRIES = 100000  -- one close's reply: a region further behind is refused

local function red_call(args, count)
  check_api(args[1])
  local cfg = config()
  if tonumber(cfg.shard) ~= 0 then
    fail(CODE_WRONGSHARD, "red operations run on a region's first shard, not shard " .. cfg.shard)
  end
  check_consumed(args, count + 1)
  return cfg
end

local function count_arg(value, what)
  local n = tonumber(value or '')
  if n == nil or n < 0 or n ~= math.floor(n) or n > 9007199254740991 then
    fail(CODE_INVALID, what .. ' must be a non-negative integer, got ' .. q(tostring(value)))
  end
  return n
end

local function token_state()
  local h = redis.call('HMGET', RED_TOKEN, 'fence', 'open', 'seq', 'trimmed')
  return tonumber(h[1] or '-1'), tonumber(h[2] or '-1'), tonumber(h[3] or '0'), tonumber(h[4] or '0')
end

local function red_name(namespace, key)
  check_part('register namespace', namespace)
  check_part('register key', key)
  return RED_PREFIX .. namespace .. '\0' .. key
end

-- An operation's effect applied here: the register's value, and the log entry a later holder takes.
local function apply_red(seq, namespace, key, stored)
  redis.call('HSET', red_name(namespace, key), 'v', stored, 'at', seq)
  redis.call('HSET', RED_LOG, seq, namespace .. '\0' .. key .. '\0' .. stored)
  redis.call('HSET', RED_TOKEN, 'seq', seq)
end

-- args: api, slot, have ('' for none). Announces `slot` here (accepted 1 unless a later one was
-- announced already). Returns {accepted, fence, seq, then seq, entry for every operation after
-- `have`}.
local function gear_red_close(keys, args)
  red_call(args, 3)
  local slot = count_arg(args[2], 'slot')
  local fence, _, seq, trimmed = token_state()
  local have = seq
  if args[3] ~= '' then have = count_arg(args[3], 'have') end
  local accepted = 0
  if slot >= fence then
    accepted = 1
    fence = slot
    redis.call('HSET', RED_TOKEN, 'fence', slot)
  end
  if have < trimmed or seq - have > MAX_RED_ENTRIES then
    fail(CODE_INVALID, 'region is ' .. (seq - have) .. ' red operations behind, more than this region keeps')
  end
  local reply = {accepted, fence, seq}
  for n = have + 1, seq do
    reply[#reply + 1] = n
    reply[#reply + 1] = redis.call('HGET', RED_LOG, n)
  end
  return reply
end

-- args: api, slot, trim, then seq, entry pairs (from every region's close). Opens `slot` here
-- unless a later one was announced: the operations this region lacks applied in order first.
-- Entries at or below `trim` are in every region: they leave the log. Returns {1, seq} or {0, fence}.
local function gear_red_open(keys, args)
  check_api(args[1])
  local cfg = config()
  if tonumber(cfg.shard) ~= 0 then fail(CODE_WRONGSHARD, "red operations run on a region's first shard") end
  local slot, trim = count_arg(args[2], 'slot'), count_arg(args[3], 'trim')
  if (#args - 3) % 2 ~= 0 then fail(CODE_INVALID, 'entries come in pairs: seq, entry') end
  local fence, open, seq, trimmed = token_state()
  if fence > slot then return {0, fence} end
  if open ~= slot then
    for i = 4, #args, 2 do
      local n = count_arg(args[i], 'entry seq')
      if n > seq then
        if n ~= seq + 1 then fail(CODE_INVALID, 'red operation ' .. n .. ' comes before ' .. (seq + 1)) end
        local namespace, key, stored = string.match(args[i + 1], '^([^%z]*)%z([^%z]*)%z(.*)$')
        if namespace == nil then fail(CODE_INVALID, 'not a red log entry: ' .. q(args[i + 1])) end
        apply_red(n, namespace, key, stored)
        seq = n
      end
    end
    redis.call('HSET', RED_TOKEN, 'fence', slot, 'open', slot)
  end
  trim = math.min(trim, seq)
  for n = trimmed + 1, trim do redis.call('HDEL', RED_LOG, n) end
  if trim > trimmed then redis.call('HSET', RED_TOKEN, 'trimmed', trim) end
  return {1, seq}
end

local function holds(slot)
  local fence, open = token_state()
  return open == slot and fence == slot, fence
end

-- args: api, slot, namespace, key. {1, stored ('' none), at (0 none)} while this region holds
-- the token for `slot`, else {0, fence}.
local function gear_red_get(keys, args)
  red_call(args, 4)
  local slot = count_arg(args[2], 'slot')
  local name = red_name(args[3], args[4])
  local held, fence = holds(slot)
  if not held then return {0, fence} end
  local h = redis.call('HMGET', name, 'v', 'at')
  return {1, h[1] or '', tonumber(h[2] or '0')}
end

-- args: api, slot, namespace, key, stored, expect ('' any, else the `at` it must still be at).
-- The next red operation: {1, its seq}; {2, at} if the register moved on; {0, fence} if this
-- region does not hold the token for `slot`.
local function gear_red_put(keys, args)
  red_call(args, 6)
  local slot = count_arg(args[2], 'slot')
  local name = red_name(args[3], args[4])
  check_strong_value(args[5])
  local held, fence = holds(slot)
  if not held then return {0, fence} end
  if args[6] ~= '' then
    local at = tonumber(redis.call('HGET', name, 'at') or '0')
    if at ~= count_arg(args[6], 'expected seq') then return {2, at} end
  end
  local _, _, seq = token_state()
  apply_red(seq + 1, args[3], args[4], args[5])
  return {1, seq + 1}
end
