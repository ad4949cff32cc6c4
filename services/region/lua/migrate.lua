-- Gear MIGRATION (paper Alg. 2, lines 15-19): a label above the client's, handed to the sink,
-- which is told at once on a pub/sub channel (a client waits for this label: no batching delay).
-- Under gentlerain nothing travels: the client's own ts is what the target waits to be stable.
-- args: api, label (4), target region. Returns the migration label's ts.
local function gear_migrate(keys, args)
  check_api(args[1])
  local cfg = config()
  local client_ts = check_label(cfg, args, 2)
  local target = args[6] or ''
  check_region(cfg, target)
  check_consumed(args, 7)
  if cfg.protocol == 'gentlerain' then return client_ts end
  local last, outside = unpack(redis.call('HMGET', GEAR_KEY, 'last_ts', OUTSIDE_ORDER_FIELD))
  local ts = math.max(client_ts + 1, now_us(), tonumber(last or '0') + 1)
  redis.call('HSET', GEAR_KEY, 'last_ts', I(ts))
  if cfg.emits == '1' then
    redis.call('XADD', LABEL_STREAM, I(ts) .. '-0', LABEL_FIELD, label_kind('m', outside) .. '|' .. I(ts) .. '|' .. cfg.gear .. '|' .. target)
    redis.call('PUBLISH', SINK_WAKE_CHANNEL, I(ts))
  end
  return ts
end
