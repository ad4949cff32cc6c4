-- Gear READ: named cells, a slice of the sorted columns, or the whole row, in one round trip.
-- KEYS: data hash, column index, counters. ARGV: mode ('cells'|'slice'|'row'), then
--   cells: column...;  slice: after, limit, reverse ('1'/'0');  row: limit.
-- Returns {columns, cells, counter_fields_flat, next_cursor}; a whole row wider than its limit
-- is an error 'WIDE <limit>' (never a silently cut row).
local UNPACK_STEP = 1000
local mode = ARGV[1]
local columns, next_cursor = {}, ''
if mode == 'cells' then
  for i = 2, #ARGV do columns[#columns + 1] = ARGV[i] end
elseif mode == 'slice' then
  local after, limit, reverse = ARGV[2], tonumber(ARGV[3]), ARGV[4] == '1'
  if reverse then
    local hi = after == '' and '+' or '(' .. after
    columns = redis.call('ZREVRANGEBYLEX', KEYS[2], hi, '-', 'LIMIT', 0, limit)
  else
    local lo = after == '' and '-' or '(' .. after
    columns = redis.call('ZRANGEBYLEX', KEYS[2], lo, '+', 'LIMIT', 0, limit)
  end
  if #columns == limit then next_cursor = columns[#columns] end
else
  local limit = tonumber(ARGV[2])
  columns = redis.call('ZRANGEBYLEX', KEYS[2], '-', '+', 'LIMIT', 0, limit + 1)
  if #columns > limit then return redis.error_reply('WIDE ' .. limit) end
end
if #columns == 0 then return {{}, {}, {}, next_cursor} end
-- HMGET in pieces: Lua's unpack stops at ~8,000 values ("too many results to unpack").
local cells = {}
for first = 1, #columns, UNPACK_STEP do
  local part = redis.call('HMGET', KEYS[1], unpack(columns, first, math.min(first + UNPACK_STEP - 1, #columns)))
  for i = 1, #part do cells[#cells + 1] = part[i] end
end
local has_counter = false
for i = 1, #cells do
  if cells[i] and string.find(cells[i], '^%d+|[^|]*|c|') then has_counter = true break end
end
local counters = {}
if has_counter then counters = redis.call('HGETALL', KEYS[3]) end
return {columns, cells, counters, next_cursor}
