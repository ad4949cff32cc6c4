-- Gear MIGRATION (paper Alg. 2, lines 15-19): a label above the client's, handed to the sink
-- (which reads its stream as it grows: the label leaves at once).
-- Under gentlerain and cure nothing travels: the target waits for the client's own ts (vector).
-- args: api, label (5), target region. Returns the migration label's ts.
local function gear_migrate(keys, args)
  check_api(args[1])
  local cfg = config()
  local client_ts = check_label(cfg, args, 2)
  local target = args[7] or ''
  check_region(cfg, target)
  check_consumed(args, 8)
  if cfg.migration_label ~= '1' then return client_ts end  -- the client's ts travels instead
  local last, outside = unpack(redis.call('HMGET', GEAR_KEY, 'last_ts', OUTSIDE_ORDER_FIELD))
  local ts = own_ts(cfg, math.max(client_ts + 1, now_us(), tonumber(last or '0') + 1))
  redis.call('HSET', GEAR_KEY, 'last_ts', I(ts))
  if cfg.emits == '1' then
    append_label(cfg, ts, label_kind('m', outside) .. '|' .. I(ts) .. '|' .. cfg.gear .. '|' .. target)
  end
  return ts
end
