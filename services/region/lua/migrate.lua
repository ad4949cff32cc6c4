-- Gear MIGRATION (paper Alg. 2, lines 15-19): a label above the client's, handed to the sink,
-- which is told at once on a pub/sub channel (a client waits for this label: no batching delay).
-- KEYS: gear, label stream. ARGV: client_ts, src, target_region, emit_label, wake channel.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('HGET', KEYS[1], 'last_ts') or '0')
local ts = math.max(tonumber(ARGV[1]) + 1, now, last + 1)
redis.call('HSET', KEYS[1], 'last_ts', I(ts))
if ARGV[4] == '1' then
  redis.call('XADD', KEYS[2], I(ts) .. '-0', 'l', 'm|' .. I(ts) .. '|' .. ARGV[2] .. '|' .. ARGV[3])
  redis.call('PUBLISH', ARGV[5], I(ts))
end
return ts
