-- Gear UPDATE (paper Alg. 2): label generation, write, bulk and label stream appends, atomically.
-- args: api, label (5), n_mutations, then per mutation: group, row, n_ops, then per op:
--       kind ('s' set, 'd' delete, 'i' increment), column, arg.
-- Returns the label's ts (the last mutation's; each mutation gets its own ts, consecutive).
local MAX_INCREMENT = 2 ^ 53  -- counters are Lua numbers (doubles): exact up to here

-- Every check of a write, before anything is written: returns the client's ts, the mutations
-- ({group, row, replicate, first op index, n_ops, keys...}), the settings and the client's
-- vector as it came (checked).
local function check_write(args)
  check_api(args[1])
  local cfg = config()
  local client_ts = check_label(cfg, args, 2)
  local n = whole(args[7])
  if n == nil or n < 1 then fail(CODE_INVALID, 'a batch needs at least one mutation') end
  if n > MAX_OPS then fail(CODE_INVALID, 'at most ' .. MAX_OPS .. ' mutations per batch') end
  local max_value = tonumber(cfg.max_value)
  local mutations = {}
  local a = 8
  for m = 1, n do
    local group, row, nops = args[a], args[a + 1], whole(args[a + 2])
    local replicas = check_row(cfg, group, row)
    if nops == nil or nops < 1 then fail(CODE_INVALID, 'a mutation needs at least one column operation') end
    if nops > MAX_OPS then fail(CODE_INVALID, 'at most ' .. MAX_OPS .. ' column operations per mutation') end
    local dkey, ikey, ckey = row_keys(group, row)
    local p = a + 3
    for o = 1, nops do
      local kind, column, arg = args[p], args[p + 1], args[p + 2]
      check_name('column name', column)
      if arg == nil then fail(CODE_INVALID, 'column ' .. q(column) .. ': missing argument') end
      if kind == 's' then
        if #arg > max_value then
          fail(CODE_INVALID, 'column ' .. q(column) .. ': value of ' .. #arg .. ' bytes exceeds the limit of '
            .. max_value .. ' bytes')
        end
      elseif kind == 'i' then
        if not string.match(arg, '^-?%d+$') or #arg > 17 or math.abs(tonumber(arg)) > MAX_INCREMENT then
          fail(CODE_INVALID, 'column ' .. q(column) .. ': increment must be an integer of at most 2^53, got '
            .. q(arg))
        end
      elseif kind ~= 'd' then
        fail(CODE_INVALID, 'column ' .. q(column) .. ': no operation (set, delete or increment)')
      end
      local cell = redis.call('HGET', dkey, column)
      if cell then
        local _, _, flag = parse_cell(cell)
        if kind == 's' and flag == 'c' then
          fail(CODE_TYPE, 'column ' .. column .. ' is a counter; use increment')
        elseif kind == 'i' and flag == 'v' then
          fail(CODE_TYPE, 'column ' .. column .. ' holds a value, not a counter')
        end
      end
      p = p + 3
    end
    mutations[m] = {group, row, #replicas > 1, a + 3, nops, dkey, ikey, ckey}
    a = p
  end
  check_consumed(args, a)
  return client_ts, mutations, cfg, args[6]
end

-- The checks alone (a batch over several shards is checked at every shard before any writes).
local function gear_check_write(keys, args)
  check_write(args)
  return 1
end

local function gear_write(keys, args)
  local client_ts, mutations, cfg, vector = check_write(args)
  local n = #mutations
  local now = now_us()
  local last, outside = unpack(redis.call('HMGET', GEAR_KEY, 'last_ts', OUTSIDE_ORDER_FIELD))
  local ts = math.max(client_ts + 1, now, tonumber(last or '0') + 1)
  local src, region, emit_label = cfg.gear, cfg.region, cfg.emits == '1'
  local kind = label_kind('u', outside)
  for m = 1, n do
    local group, row, replicate, p, nops, dkey, ikey, ckey = unpack(mutations[m])
    local ops = {}
    for o = 1, nops do
      local kind, column, arg = args[p], args[p + 1], args[p + 2]
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
    if cfg.protocol == 'cure' then merge_deps(dkey, vector, region, ts) end
    if replicate then
      -- Under cure the payload carries the writer's vector: receivers apply it once every
      -- update it names is applied there (services/protocols/cure.py).
      local body
      if cfg.protocol == 'cure' then
        body = cmsgpack.pack({ts, src, now, group, row, ops, vector})
      else
        body = cmsgpack.pack({ts, src, now, group, row, ops})
      end
      redis.call('XADD', BULK_STREAM, I(ts) .. '-0', GROUP_FIELD, group, PAYLOAD_FIELD, body)
    end
    if emit_label then
      redis.call('XADD', LABEL_STREAM, I(ts) .. '-0', LABEL_FIELD, kind .. '|' .. I(ts) .. '|' .. src .. '|' .. group .. '/' .. row)
    end
    if m < n then ts = ts + 1 end
  end
  redis.call('HSET', GEAR_KEY, 'last_ts', I(ts))
  return ts
end
