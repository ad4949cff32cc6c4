-- Gear READ: any number of reads of this shard's rows in one call, each named cells, a slice of
-- the sorted columns, or the whole row; now, or as of a time (a read-only transaction's second
-- round: causal_client/transactions.py).
-- args: api, label (5), at (0: now), n_settle, then per settle: txid, decision ('c' committed at
--   stamp, 'a' aborted, 'x' commits after `at`), stamp; then n_reads, then per read: group, row,
--   n_columns, column..., then is_slice ('1'/'0'), after, limit (0: the default), reverse.
--   Named columns, or a slice, or (neither) the whole row.
-- Returns {lvt, unresolved, row...}: lvt, the shard's time up to which what it returns is valid
-- (now: its clock; as of a time: that time); unresolved, {txid, coordinator gear} of each
-- transaction staged on a row read whose proposal is at or below `at` and that no settle named
-- (the reader asks the coordinator and reads again). Per row {columns, cells,
-- counter_fields_flat, next_cursor, size, evt, lvt} (size: the row's live columns, all of them;
-- evt: from when this state is valid at the latest; lvt: until when, at least: below a staged
-- transaction's proposal), and under cure the row's dependencies (common.lua's merge_deps) after
-- them. A whole row wider than MAX_ROW_COLUMNS is an error (never a silently cut row).
local UNPACK_STEP = 1000

local function index_range(ikey, after, limit, reverse)
  if reverse then
    return redis.call('ZREVRANGEBYLEX', ikey, after == '' and '+' or '(' .. after, '-', 'LIMIT', 0, limit)
  end
  return redis.call('ZRANGEBYLEX', ikey, after == '' and '-' or '(' .. after, '+', 'LIMIT', 0, limit)
end

local function live(cell) return cell and not string.find(cell, '^%d+|[^|]*|t|') end

-- The columns a read returns (and its cursor); `over`: the cells that differ as of a time
-- (versions.lua's changes_after, 'c' .. column -> cell or false), nil for now.
local function read_columns(read, over)
  local changed = {}
  if over then
    for key, cell in pairs(over) do
      if string.sub(key, 1, 1) == 'c' then changed[string.sub(key, 2)] = cell end
    end
  end
  local extra = 0
  for _ in pairs(changed) do extra = extra + 1 end
  local limit = (read.mode == 'slice') and read.limit or MAX_ROW_COLUMNS + 1
  local after, reverse = read.after or '', read.reverse
  local current = index_range(read.ikey, after, limit + extra, reverse)
  if extra == 0 then
    if read.mode == 'slice' then return current, (#current == limit) and current[#current] or '' end
    return current, ''
  end
  local columns = {}
  for _, column in ipairs(current) do
    if changed[column] == nil then columns[#columns + 1] = column end
  end
  local complete = #current < limit + extra  -- the whole range was read
  local bound = (not complete) and current[#current] or nil
  for column, cell in pairs(changed) do
    local in_range = after == '' or (reverse and column < after) or (not reverse and column > after)
    local within = bound == nil or (reverse and column >= bound) or (not reverse and column <= bound)
    if live(cell) and in_range and within then columns[#columns + 1] = column end
  end
  if reverse then table.sort(columns, function(x, y) return x > y end) else table.sort(columns) end
  while #columns > limit do columns[#columns] = nil end
  if read.mode == 'slice' then return columns, (#columns == limit) and columns[#columns] or '' end
  return columns, ''
end

local function read_row(read, columns, next_cursor, over)
  if #columns == 0 then return {{}, {}, {}, next_cursor} end
  -- HMGET in pieces: Lua's unpack stops at ~8,000 values ("too many results to unpack").
  local cells = {}
  for first = 1, #columns, UNPACK_STEP do
    local part = redis.call('HMGET', read.dkey, unpack(columns, first, math.min(first + UNPACK_STEP - 1, #columns)))
    for i = 1, #part do cells[#cells + 1] = part[i] end
  end
  if over then
    for i, column in ipairs(columns) do
      local cell = over['c' .. column]
      if cell ~= nil then cells[i] = cell end
    end
  end
  local has_counter = false
  for i = 1, #columns do
    if cells[i] and string.find(cells[i], '^%d+|[^|]*|c|') then has_counter = true break end
  end
  local counters = {}
  if has_counter then
    counters = redis.call('HGETALL', read.ckey)
    if over then
      local sums = {}
      for i = 1, #counters, 2 do sums[counters[i]] = counters[i + 1] end
      for key, cell in pairs(over) do
        if string.sub(key, 1, 1) == 'p' then sums[string.sub(key, 2)] = cell or nil end
      end
      counters = {}
      for field, value in pairs(sums) do counters[#counters + 1] = field; counters[#counters + 1] = value end
    end
  end
  for i = 1, #columns do cells[i] = cells[i] or false end
  return {columns, cells, counters, next_cursor}
end

-- The row's live columns (as of the time `over` stands for).
local function row_size(read, over)
  local size = redis.call('ZCARD', read.ikey)
  if over then
    for key, cell in pairs(over) do
      if string.sub(key, 1, 1) == 'c' then
        local now_live = redis.call('ZSCORE', read.ikey, string.sub(key, 2)) ~= false
        if live(cell) and not now_live then size = size + 1 end
        if now_live and not live(cell) then size = size - 1 end
      end
    end
  end
  return size
end

local function parse_reads(cfg, args, a)
  local n = whole(args[a])
  if n == nil or n < 1 then fail(CODE_INVALID, 'multi-read needs at least one read') end
  if n > MAX_OPS then fail(CODE_INVALID, 'at most ' .. MAX_OPS .. ' reads per multi-read') end
  local reads = {}
  a = a + 1
  for r = 1, n do
    local group, row, ncols = args[a], args[a + 1], whole(args[a + 2])
    check_row(cfg, group, row)
    local read = {}
    read.dkey, read.ikey, read.ckey = row_keys(group, row)
    if ncols == nil or ncols < 0 then fail(CODE_INVALID, 'a read needs a column count') end
    if ncols > MAX_OPS then fail(CODE_INVALID, 'at most ' .. MAX_OPS .. ' columns per read') end
    read.columns = {}
    for c = 1, ncols do
      local column = args[a + 2 + c]
      check_name('column name', column)
      read.columns[c] = column
    end
    a = a + 3 + ncols
    local is_slice, after, limit = args[a], args[a + 1], whole(args[a + 2])
    if is_slice == '1' then
      if ncols > 0 then fail(CODE_INVALID, 'a read names columns or a slice, not both') end
      if after == nil or limit == nil then
        fail(CODE_INVALID, 'a slice needs a cursor and a whole limit')
      end
      if limit > MAX_SLICE then
        fail(CODE_INVALID, 'slice limit must be at most ' .. MAX_SLICE .. ', got ' .. I(limit))
      end
      read.mode = 'slice'
      read.after, read.limit, read.reverse = after, (limit == 0 and DEFAULT_SLICE or limit), args[a + 3] == '1'
    elseif is_slice == '0' then
      read.mode = ncols > 0 and 'cells' or 'row'
    else
      fail(CODE_INVALID, 'a read says whether it is a slice')
    end
    a = a + 4
    read.group, read.row = group, row
    reads[r] = read
  end
  check_consumed(args, a)
  return reads
end

-- The settles a read carries: applied (committed at or below at) or dropped (aborted) now;
-- returns txid -> true for every transaction named (none of them is unresolved any more).
local function take_settles(args, at)
  local n = whole(args[8])
  if n == nil then fail(CODE_INVALID, 'a read says how many settles it carries') end
  local named, a = {}, 9
  for _ = 1, n do
    local txid, decision, stamp = args[a], args[a + 1], whole_time(args[a + 2])
    check_txid(txid)
    if stamp == nil then fail(CODE_INVALID, 'a settle needs a whole stamp') end
    if decision == 'c' and stamp <= at then
      settle_part(txid, 'c', stamp)
    elseif decision == 'a' then
      settle_part(txid, 'a', 0)
    elseif decision ~= 'c' and decision ~= 'x' then
      fail(CODE_INVALID, 'a settle is c, a or x')
    end
    named[txid] = true
    a = a + 3
  end
  return named, a
end

local function gear_read(keys, args)
  check_api(args[1])
  local cfg = config()
  check_label(cfg, args, 2)
  local at = whole_time(args[7])
  if at == nil then fail(CODE_INVALID, 'a read says as of when (0: now)') end
  local now = now_us()
  if at > 0 and at < now - RETAIN_US then
    fail(CODE_TOOOLD, 'a read as of ' .. I(now - at) .. ' µs ago: versions are kept ' .. I(RETAIN_US) .. ' µs')
  end
  if at > now + MAX_FUTURE_S * 1e6 then fail(CODE_INVALID, 'a read as of a time too far ahead') end
  local named, a = take_settles(args, at)
  local reads = parse_reads(cfg, args, a)
  -- Valid until the clock, or until just before now: a change made in this very microsecond
  -- may still get it as its stamp (the clock moves only when something is stamped).
  local lvt = math.max(clock(), now - 1)
  if at > 0 then
    raise_clock(at)  -- nothing made here from now on is stamped at or below it
    lvt = at
  end
  local out = {lvt, {}}
  for r = 1, #reads do
    local read = reads[r]
    local over = (at > 0) and changes_after(read.dkey, at) or nil
    local row
    if read.mode == 'cells' then
      row = read_row(read, read.columns, '', over)
    else
      local columns, cursor = read_columns(read, over)
      if read.mode == 'row' and #columns > MAX_ROW_COLUMNS then
        fail(CODE_WIDE, 'row ' .. q(read.row) .. ' of group ' .. q(read.group) .. ' has more than '
          .. MAX_ROW_COLUMNS .. ' columns: read it in slices (at most ' .. MAX_SLICE
          .. ' columns a page, with a cursor)')
      end
      row = read_row(read, columns, cursor, over)
    end
    row[5] = row_size(read, over)
    row[6] = (at > 0) and at or row_evt(read.dkey)
    local row_lvt = lvt
    local pending = redis.call('HGETALL', pending_key(read.dkey))
    for i = 1, #pending, 2 do
      local txid, proposal = pending[i], tonumber(pending[i + 1])
      if at == 0 then
        row_lvt = math.min(row_lvt, proposal - 1)
      elseif proposal <= at and not named[txid] then
        named[txid] = true
        local coordinator = redis.call('HGET', STAGE_PREFIX .. txid, 'coordinator') or ''
        out[2][#out[2] + 1] = txid
        out[2][#out[2] + 1] = coordinator
      end
    end
    row[7] = row_lvt
    if cfg.vectors == '1' then
      row[8] = redis.call('GET', deps_key(read.dkey)) or ''
    end
    out[#out + 1] = row
  end
  return out
end
