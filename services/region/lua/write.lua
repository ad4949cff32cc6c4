-- Gear UPDATE (paper Alg. 2): label generation, write, bulk and label stream appends, atomically.
-- KEYS: gear, bulk stream, label stream, then per mutation: data hash, column index, counters.
-- ARGV: client_ts, src, region, emit_label, n_mutations,
--       then per mutation: group, row, replicate, n_ops, then per op: kind, column, arg.
local client_ts = tonumber(ARGV[1])
local src, region, emit_label = ARGV[2], ARGV[3], ARGV[4] == '1'
local n = tonumber(ARGV[5])

-- First pass: type checks, so that nothing is written when any op is invalid.
local a, k = 6, 4
for m = 1, n do
  local nops = tonumber(ARGV[a + 3])
  local p = a + 4
  for o = 1, nops do
    local kind, column = ARGV[p], ARGV[p + 1]
    local cell = redis.call('HGET', KEYS[k], column)
    if cell then
      local _, _, flag = parse_cell(cell)
      if kind == 's' and flag == 'c' then
        return redis.error_reply('TYPE column ' .. column .. ' is a counter; use increment')
      elseif kind == 'i' and flag == 'v' then
        return redis.error_reply('TYPE column ' .. column .. ' holds a value, not a counter')
      end
    end
    p = p + 3
  end
  a, k = p, k + 3
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('HGET', KEYS[1], 'last_ts') or '0')
local ts = math.max(client_ts + 1, now, last + 1)

a, k = 6, 4
for m = 1, n do
  local group, row, replicate, nops = ARGV[a], ARGV[a + 1], ARGV[a + 2] == '1', tonumber(ARGV[a + 3])
  local dkey, ikey, ckey = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  local ops = {}
  local p = a + 4
  for o = 1, nops do
    local kind, column, arg = ARGV[p], ARGV[p + 1], ARGV[p + 2]
    if kind == 's' then
      put_value(dkey, ikey, column, ts, src, arg)
      ops[#ops + 1] = {'s', column, arg}
    elseif kind == 'd' then
      put_tombstone(dkey, ikey, column, ts, src)
      ops[#ops + 1] = {'d', column, ''}
    else
      local partial = I(partial_of(ckey, region, column) + tonumber(arg))
      put_partial(dkey, ikey, ckey, column, region, ts, src, partial)
      -- Replicas receive the new partial sum (state), so a re-delivery cannot double-count.
      ops[#ops + 1] = {'p', column, partial}
    end
    p = p + 3
  end
  if replicate then
    local body = cmsgpack.pack({ts, src, now, group, row, ops})
    redis.call('XADD', KEYS[2], I(ts) .. '-0', 'g', group, 'p', body)
  end
  if emit_label then
    redis.call('XADD', KEYS[3], I(ts) .. '-0', 'l', 'u|' .. I(ts) .. '|' .. src .. '|' .. group .. '/' .. row)
  end
  a, k = p, k + 3
  if m < n then ts = ts + 1 end
end
redis.call('HSET', KEYS[1], 'last_ts', I(ts))
return ts
