-- Transactions over several shards of a region (Eiger's 2PC-PCI; the algorithm and why it is
-- atomic are in causal_client/transactions.py and docs/PROTOCOLS.md, "Transactions").
--
-- A part staged on a shard is invisible: a record STAGE_PREFIX .. txid holds its rows, each row's
-- pending hash (q:<group>:<row>, txid -> proposal) says that a read of it may have to ask the
-- coordinator, and STAGED_KEY indexes the records by when they were made (for the sweeper). The
-- coordinator shard keeps the decision, DECISION_PREFIX .. txid: 'c|<stamp>|<src>' committed,
-- 'a' aborted, 'p|<least stamp>' undecided but promised to commit above that stamp (a read at an
-- earlier time asked). A part is applied at the commit stamp, which is at least every proposal,
-- so a read that saw a shard before the part was staged stays valid.

local function pending_key(dkey) return 'q:' .. string.sub(dkey, 3) end

local function check_txid(txid)
  if type(txid) ~= 'string' or #txid < 8 or #txid > 64 or not string.match(txid, '^[%w%-_.:|/]+$') then
    fail(CODE_INVALID, 'bad transaction id ' .. q(tostring(txid)))
  end
end

local function keep_decision(txid, value)
  redis.call('SET', DECISION_PREFIX .. txid, value, 'EX', DECISION_TTL_S)
end

-- Records a staged part: rows {group, row, ops} (ops {kind, column, arg}); fields of the record.
local function stage_part(txid, rows, fields, proposal)
  local key = STAGE_PREFIX .. txid
  if redis.call('EXISTS', key) == 1 then fail(CODE_INVALID, 'transaction ' .. q(txid) .. ' is staged already') end
  fields.proposal, fields.since, fields.rows = I(proposal), I(now_us()), cmsgpack.pack(rows)
  local flat = {}
  for k, v in pairs(fields) do flat[#flat + 1] = k; flat[#flat + 1] = v end
  redis.call('HSET', key, unpack(flat))
  for _, row in ipairs(rows) do
    local dkey = row_keys(row[1], row[2])
    redis.call('HSET', pending_key(dkey), txid, I(proposal))
  end
  redis.call('ZADD', STAGED_KEY, now_us(), txid)
end

-- Applies (decision 'c', at stamp) or drops ('a') a staged part; nothing when none is staged.
local function settle_part(txid, decision, stamp)
  local key = STAGE_PREFIX .. txid
  local record = redis.call('HGETALL', key)
  if #record == 0 then return 0 end
  local f = {}
  for i = 1, #record, 2 do f[record[i]] = record[i + 1] end
  local rows = cmsgpack.unpack(f.rows)
  for _, row in ipairs(rows) do
    local dkey, ikey, ckey = row_keys(row[1], row[2])
    if decision == 'c' then
      local ts, src, origin = stamp, f.src, f.origin
      if f.mode == 'r' then ts = tonumber(f.ts) end
      for _, op in ipairs(row[3]) do
        put_op(dkey, ikey, ckey, op[1], op[2], op[3], origin, ts, src, stamp)
      end
      fold_versions(dkey)
      if f.deps and f.deps ~= '' then merge_deps(dkey, f.deps, origin, ts) end
    end
    redis.call('HDEL', pending_key(dkey), txid)
  end
  if decision == 'c' then raise_clock(stamp) end
  redis.call('DEL', key)
  redis.call('ZREM', STAGED_KEY, txid)
  return 1
end

-- The ops of a checked mutation (check_write's) as a staged row keeps them.
local function staged_row(args, mutation)
  local group, row, _, p, nops = unpack(mutation)
  local ops = {}
  for o = 1, nops do
    local kind = args[p]
    if kind == 'i' then
      fail(CODE_INVALID, 'an atomic batch over several shards increments counters of one shard only: '
        .. 'counter ' .. q(args[p + 1]) .. ' of row ' .. q(row) .. ' is on another shard than its first '
        .. 'increment (increment them in separate batches, or use atomic=False)')
    end
    ops[o] = {kind, args[p + 1], kind == 's' and args[p + 2] or ''}
    p = p + 3
  end
  return {group, row, ops}
end

-- CLIENT STAGE: a cohort's part of a local transaction, checked and staged.
-- args: api, label (5), txid, coordinator gear, n_mutations, mutations (as check_write reads
-- them). Returns the proposal (the commit stamp will be at least that).
local function gear_stage(keys, args)
  local txid, coordinator = args[7], args[8]
  table.remove(args, 7)
  table.remove(args, 7)
  check_txid(txid)
  local client_ts, mutations, cfg = check_write(args)
  if redis.call('SISMEMBER', GEARS_KEY, coordinator) == 0 then
    fail(CODE_INVALID, 'unknown coordinator gear ' .. q(coordinator))
  end
  local rows = {}
  for m = 1, #mutations do rows[m] = staged_row(args, mutations[m]) end
  local proposal = next_stamp(client_ts + 1)
  stage_part(txid, rows, {mode = 'l', src = coordinator, coordinator = coordinator, origin = cfg.region}, proposal)
  return proposal
end

-- CLIENT COMMIT at the coordinator: every mutation of the transaction (this shard's are
-- written now; the others' were staged by their shards), at one ts above every proposal; one
-- label and one bulk entry for all of them, as an atomic write's.
-- args: api, label (5), txid, least stamp (the greatest proposal), n_mutations, mutations.
-- Returns the ts; refused (ABORTED) when the transaction was aborted meanwhile.
local function gear_commit(keys, args)
  local txid, floor = args[7], whole_time(args[8])
  table.remove(args, 7)
  table.remove(args, 7)
  check_txid(txid)
  if floor == nil then fail(CODE_INVALID, 'a commit needs the greatest proposal') end
  local client_ts, mutations, cfg, vector = check_write(args, true)
  local decided = redis.call('GET', DECISION_PREFIX .. txid)
  if decided == 'a' then fail(CODE_ABORTED, 'transaction ' .. q(txid) .. ' was aborted (it took too long)') end
  if decided and string.sub(decided, 1, 1) == 'c' then return tonumber(string.match(decided, '^c|(%d+)|')) end
  local least = decided and tonumber(string.match(decided, '^p|(%d+)$')) or 0
  local now = now_us()
  local last, outside = unpack(redis.call('HMGET', GEAR_KEY, 'last_ts', OUTSIDE_ORDER_FIELD))
  local ts = own_ts(cfg, math.max(client_ts + 1, now, tonumber(last or '0') + 1, floor, least))
  local shipped, groups, seen, all_groups, seen_all = {}, {}, {}, {}, {}
  for m = 1, #mutations do
    local mutation = mutations[m]
    local row
    if mutation[9] then
      row = write_mutation(cfg, args, mutation, ts, vector)
    else
      row = staged_row(args, mutation)
    end
    local group = row[1]
    if not seen_all[group] then all_groups[#all_groups + 1] = group; seen_all[group] = true end
    if mutation[3] then
      shipped[#shipped + 1] = row
      if not seen[group] then groups[#groups + 1] = group; seen[group] = true end
    end
  end
  local label = cfg.emits == '1'
    and label_text(label_kind('u', outside), ts, cfg.gear, all_groups, mutations[1][1] .. '/' .. mutations[1][2])
  ship_and_label(cfg, ts, cfg.gear, now, groups, shipped, vector, label)
  redis.call('HSET', GEAR_KEY, 'last_ts', I(ts))
  keep_decision(txid, 'c|' .. I(ts) .. '|' .. cfg.gear)
  return ts
end

-- REMOTE STAGE (services): a part of a remote update whose rows span this region's shards.
-- args: txid, coordinator gear (here), floor (the proposal goes above it), ts, src, origin region,
-- deps, n_rows, then per row: group, row, n_ops, then per op: kind ('s', 'd', 'p'), column, arg.
-- Returns the proposal.
local function gear_stage_remote(keys, args)
  local txid, coordinator, floor = args[1], args[2], tonumber(args[3])
  local ts, src, origin, deps = tonumber(args[4]), args[5], args[6], args[7]
  check_txid(txid)
  local rows, a = {}, 9
  for r = 1, tonumber(args[8]) do
    local group, row, nops = args[a], args[a + 1], tonumber(args[a + 2])
    local ops = {}
    for o = 1, nops do
      local p = a + 3 + 3 * (o - 1)
      ops[o] = {args[p], args[p + 1], args[p + 2]}
    end
    rows[r] = {group, row, ops}
    a = a + 3 + 3 * nops
  end
  local proposal = next_stamp(math.max(ts, floor + 1))
  stage_part(txid, rows, {mode = 'r', ts = I(ts), src = src, origin = origin, deps = deps, coordinator = coordinator},
    proposal)
  return proposal
end

-- REMOTE DECIDE (services): at the coordinator shard, commits at a stamp above floor (the
-- greatest proposal) and applies its own staged part. args: txid, floor. Returns the stamp.
local function gear_decide(keys, args)
  local txid, floor = args[1], tonumber(args[2])
  check_txid(txid)
  local decided = redis.call('GET', DECISION_PREFIX .. txid)
  if decided == 'a' then fail(CODE_ABORTED, 'transaction ' .. q(txid) .. ' was aborted') end
  if decided and string.sub(decided, 1, 1) == 'c' then return tonumber(string.match(decided, '^c|(%d+)|')) end
  local least = decided and tonumber(string.match(decided, '^p|(%d+)$')) or 0
  local stamp = next_stamp(math.max(floor, least))
  keep_decision(txid, 'c|' .. I(stamp) .. '|')
  settle_part(txid, 'c', stamp)
  return stamp
end

-- SETTLE (clients and services): applies a staged part at the commit stamp ('c') or drops it
-- ('a'). args: txid, decision, stamp. Idempotent.
local function gear_settle(keys, args)
  local txid, decision, stamp = args[1], args[2], tonumber(args[3] or '0')
  check_txid(txid)
  if decision ~= 'c' and decision ~= 'a' then fail(CODE_INVALID, 'a settle says commit (c) or abort (a)') end
  return settle_part(txid, decision, stamp)
end

-- CHECK at a coordinator (readers, the sweeper): per transaction, {'c', stamp} committed, {'a'}
-- aborted, or {'x'}: undecided, and now promised to commit above t (or, with abort, aborted).
-- args: api, t, abort ('1'/'0'), txid... (a reader's check is what makes reads non-blocking).
local function gear_check(keys, args)
  check_api(args[1])
  local t, abort = whole_time(args[2]), args[3] == '1'
  if t == nil then fail(CODE_INVALID, 'a check needs a whole time') end
  local out = {}
  for i = 4, #args do
    local txid = args[i]
    check_txid(txid)
    local decided = redis.call('GET', DECISION_PREFIX .. txid)
    if decided and string.sub(decided, 1, 1) == 'c' then
      out[#out + 1] = {'c', string.match(decided, '^c|(%d+)|')}
    elseif decided == 'a' or abort then
      if decided ~= 'a' then keep_decision(txid, 'a') end
      out[#out + 1] = {'a'}
    else
      local least = decided and tonumber(string.match(decided, '^p|(%d+)$')) or 0
      if t + 1 > least then keep_decision(txid, 'p|' .. I(t + 1)) end
      out[#out + 1] = {'x'}
    end
  end
  return out
end

-- STUCK (the sweeper): parts staged before now - args[1] µs, at most args[2]: {txid, coordinator
-- gear, mode} each.
local function gear_stuck(keys, args)
  local before = now_us() - tonumber(args[1])
  local out = {}
  for _, txid in ipairs(redis.call('ZRANGEBYSCORE', STAGED_KEY, '-inf', I(before), 'LIMIT', 0, tonumber(args[2]))) do
    local coordinator, mode = unpack(redis.call('HMGET', STAGE_PREFIX .. txid, 'coordinator', 'mode'))
    out[#out + 1] = {txid, coordinator or '', mode or ''}
  end
  return out
end
