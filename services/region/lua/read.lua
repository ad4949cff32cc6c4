-- Gear READ: any number of reads of this shard's rows in one call, each named cells, a slice of
-- the sorted columns, or the whole row.
-- args: api, label (5), n_reads, then per read: group, row, n_columns, column..., then
--   is_slice ('1'/'0'), after, limit (0: the default), reverse ('1'/'0'). Named columns, or a
--   slice, or (neither) the whole row.
-- Returns per read {columns, cells, counter_fields_flat, next_cursor, size} (size: the row's live
-- columns, all of them, whatever was read: its index's cardinality, tombstones not counted), and
-- under cure the row's dependencies (common.lua's merge_deps) after them; a whole row wider than MAX_ROW_COLUMNS is an
-- error (never a silently cut row).
local UNPACK_STEP = 1000

local function read_columns(mode, ikey, after, limit, reverse)
  if mode == 'slice' then
    local columns
    if reverse then
      columns = redis.call('ZREVRANGEBYLEX', ikey, after == '' and '+' or '(' .. after, '-', 'LIMIT', 0, limit)
    else
      columns = redis.call('ZRANGEBYLEX', ikey, after == '' and '-' or '(' .. after, '+', 'LIMIT', 0, limit)
    end
    return columns, (#columns == limit) and columns[#columns] or ''
  end
  return redis.call('ZRANGEBYLEX', ikey, '-', '+', 'LIMIT', 0, MAX_ROW_COLUMNS + 1), ''
end

local function read_row(dkey, ckey, columns, next_cursor)
  if #columns == 0 then return {{}, {}, {}, next_cursor} end
  -- HMGET in pieces: Lua's unpack stops at ~8,000 values ("too many results to unpack").
  local cells = {}
  for first = 1, #columns, UNPACK_STEP do
    local part = redis.call('HMGET', dkey, unpack(columns, first, math.min(first + UNPACK_STEP - 1, #columns)))
    for i = 1, #part do cells[#cells + 1] = part[i] end
  end
  local has_counter = false
  for i = 1, #cells do
    if cells[i] and string.find(cells[i], '^%d+|[^|]*|c|') then has_counter = true break end
  end
  local counters = {}
  if has_counter then counters = redis.call('HGETALL', ckey) end
  return {columns, cells, counters, next_cursor}
end

local function gear_read(keys, args)
  check_api(args[1])
  local cfg = config()
  check_label(cfg, args, 2)
  local n = whole(args[7])
  if n == nil or n < 1 then fail(CODE_INVALID, 'multi-read needs at least one read') end
  if n > MAX_OPS then fail(CODE_INVALID, 'at most ' .. MAX_OPS .. ' reads per multi-read') end
  -- First pass: every check (a bad read anywhere fails the whole call).
  local reads = {}
  local a = 8
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
  local out = {}
  for r = 1, n do
    local read = reads[r]
    if read.mode == 'cells' then
      out[r] = read_row(read.dkey, read.ckey, read.columns, '')
    else
      local columns, cursor = read_columns(read.mode, read.ikey, read.after, read.limit, read.reverse)
      if read.mode == 'row' and #columns > MAX_ROW_COLUMNS then
        fail(CODE_WIDE, 'row ' .. q(read.row) .. ' of group ' .. q(read.group) .. ' has more than '
          .. MAX_ROW_COLUMNS .. ' columns: read it in slices (at most ' .. MAX_SLICE
          .. ' columns a page, with a cursor)')
      end
      out[r] = read_row(read.dkey, read.ckey, columns, cursor)
    end
    out[r][5] = redis.call('ZCARD', read.ikey)
    if cfg.protocol == 'cure' then
      out[r][6] = redis.call('GET', deps_key(read.dkey)) or ''
    end
  end
  return out
end
