-- Gear UPDATE (paper Alg. 2): label generation, write, the payload's and label's appends, atomically.
-- args: api, label (5), atomic ('1'/'0'), n_mutations, then per mutation: group, row, n_ops,
--       then per op: kind ('s' set, 'd' delete, 'i' increment), column, arg.
-- Returns the label's ts: an atomic write's one ts; else the last mutation's (each mutation gets
-- its own, consecutive).
local MAX_INCREMENT = 2 ^ 53  -- counters are Lua numbers (doubles): exact up to here

-- Every check of a write, before anything is written: returns the client's ts, the mutations
-- ({group, row, replicate, first op index, n_ops, keys...}), the settings and the client's
-- vector as it came (checked).
-- With any_shard (a transaction's coordinator), rows of other shards pass too: each mutation
-- says whether it is this shard's (its 9th field).
local function check_write(args, any_shard)
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
    local replicas = check_row(cfg, group, row, any_shard)
    if nops == nil or nops < 1 then fail(CODE_INVALID, 'a mutation needs at least one column operation') end
    if nops > MAX_OPS then fail(CODE_INVALID, 'at most ' .. MAX_OPS .. ' column operations per mutation') end
    local dkey, ikey, ckey = row_keys(group, row)
    local owned = owns_row(cfg, group, row)
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
      -- a row of another shard (a coordinator's) is checked by its own shard when it stages:
      -- its keys are not here, and on a cluster they may be on another node
      local cell = owned and redis.call('HGET', dkey, column)
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
    mutations[m] = {group, row, #replicas > 1, a + 3, nops, dkey, ikey, ckey, owned}
    a = p
  end
  check_consumed(args, a)
  return client_ts, mutations, cfg, args[6]
end

-- A write's atomic flag (args[7]), taken out of args so that check_write reads the rest.
local function take_atomic(args)
  local atomic = args[7]
  if atomic ~= '1' and atomic ~= '0' then fail(CODE_INVALID, 'a write says whether it is atomic') end
  table.remove(args, 7)
  return atomic == '1'
end

-- The checks alone (a batch over several shards is checked at every shard before any writes).
local function gear_check_write(keys, args)
  take_atomic(args)
  check_write(args)
  return 1
end

-- One bulk entry: the label's ts and source, the origin's time, the rows ([group, row, ops]),
-- and under cure the writer's vector. GROUP_FIELD names every group the rows are of. With
-- `label` (labels_in_bulk: the sink reads the bulk stream) the write's label rides in it.
local function ship(cfg, ts, src, now, groups, rows, vector, label)
  local body
  if cfg.vectors == '1' then
    body = cmsgpack.pack({ts, src, now, rows, vector})
  else
    body = cmsgpack.pack({ts, src, now, rows})
  end
  local fields = {GROUP_FIELD, table.concat(groups, ' '), PAYLOAD_FIELD, body}
  if label then fields[5], fields[6] = LABEL_FIELD, label end
  redis.call('XADD', BULK_STREAM, I(ts) .. '-0', unpack(fields))
end

-- A label without a payload to ride in (a write that ships nothing: its rows are replicated here
-- only; a migration's): under labels_in_bulk an entry of no group, which no region is sent, else
-- an entry of the label stream (C3's).
local function append_label(cfg, ts, label)
  if cfg.labels_in_bulk == '1' then
    redis.call('XADD', BULK_STREAM, I(ts) .. '-0', GROUP_FIELD, '', LABEL_FIELD, label)
  else
    redis.call('XADD', LABEL_STREAM, I(ts) .. '-0', LABEL_FIELD, label)
  end
end

-- One label's text: 'u' for rows of one group, 't' (with the groups) for several (pump.py).
local function label_text(kind, ts, src, groups, target)
  if #groups > 1 then
    kind = (kind == 'U') and 'T' or 't'
    target = table.concat(groups, ' ') .. '|' .. target
  end
  return kind .. '|' .. I(ts) .. '|' .. src .. '|' .. target
end

-- A write's shipping and its label: the label rides in the bulk entry under labels_in_bulk (one
-- stream, one read for the sink and the bulk sender), else goes on its own (append_label).
local function ship_and_label(cfg, ts, src, now, groups, rows, vector, label)
  local rides = label and #rows > 0 and cfg.labels_in_bulk == '1'
  if #rows > 0 then ship(cfg, ts, src, now, groups, rows, vector, rides and label or nil) end
  if label and not rides then append_label(cfg, ts, label) end
end

-- The mutations' writes at ts (and stamp ts), each row's versions folded; returns the row's
-- replicated ops ({group, row, ops}).
local function write_mutation(cfg, args, mutation, ts, vector)
  local group, row, replicate, p, nops, dkey, ikey, ckey = unpack(mutation)
  local src, region = cfg.gear, cfg.region
  local ops = {}
  for o = 1, nops do
    local kind, column, arg = args[p], args[p + 1], args[p + 2]
    if kind == 's' then
      put_value(dkey, ikey, column, ts, src, arg, ts)
      ops[#ops + 1] = {'s', column, arg}
    elseif kind == 'd' then
      put_tombstone(dkey, ikey, column, ts, src, ts)
      ops[#ops + 1] = {'d', column, ''}
    else
      local partial = I(partial_of(ckey, region, column) + tonumber(arg))
      put_partial(dkey, ikey, ckey, column, region, ts, src, partial, ts)
      -- Replicas receive the new partial sum (state), so a re-delivery cannot double-count.
      ops[#ops + 1] = {'p', column, partial}
    end
    p = p + 3
  end
  fold_versions(dkey)
  if cfg.vectors == '1' then merge_deps(dkey, vector, region, ts) end
  return {group, row, ops}
end

-- args: api, label (5), atomic ('1': every mutation at one ts, under one label, shipped as one
-- update; '0': each its own), n_mutations, then the mutations (as check_write reads them).
local function gear_write(keys, args)
  local atomic = take_atomic(args)
  local client_ts, mutations, cfg, vector = check_write(args)
  local n = #mutations
  local now = now_us()
  local last, outside = unpack(redis.call('HMGET', GEAR_KEY, 'last_ts', OUTSIDE_ORDER_FIELD))
  local ts = own_ts(cfg, math.max(client_ts + 1, now, tonumber(last or '0') + 1))
  local src, emits = cfg.gear, cfg.emits == '1'
  local kind = label_kind('u', outside)
  if atomic then
    -- Under cure the payload carries the writer's vector: receivers apply it once every update
    -- it names is applied there (services/protocols/cure.py).
    local shipped, groups, seen, all_groups, seen_all = {}, {}, {}, {}, {}
    for m = 1, n do
      local row = write_mutation(cfg, args, mutations[m], ts, vector)
      local group = row[1]
      if not seen_all[group] then all_groups[#all_groups + 1] = group; seen_all[group] = true end
      if mutations[m][3] then
        shipped[#shipped + 1] = row
        if not seen[group] then groups[#groups + 1] = group; seen[group] = true end
      end
    end
    local label = emits and label_text(kind, ts, src, all_groups, mutations[1][1] .. '/' .. mutations[1][2])
    ship_and_label(cfg, ts, src, now, groups, shipped, vector, label)
  else
    for m = 1, n do
      local row = write_mutation(cfg, args, mutations[m], ts, vector)
      local label = emits and label_text(kind, ts, src, {row[1]}, row[1] .. '/' .. row[2])
      ship_and_label(cfg, ts, src, now, {row[1]}, mutations[m][3] and {row} or {}, vector, label)
      if m < n then ts = own_ts(cfg, ts + 1) end
    end
  end
  redis.call('HSET', GEAR_KEY, 'last_ts', I(ts))
  return ts
end
