-- Remote proxy DELIVER (saturn): make a run of labelled updates visible, in Saturn's order, and
-- advance the per-origin watermarks that attaches wait on. Idempotent: an update is applied only
-- while its payload is still pending.
-- KEYS: pending hash, watermark hash, then per update: data hash, column index, counters.
-- ARGV: n_updates, then per update: pending field, ts, src, origin_region, n_ops, then per op:
--       kind, column, arg; then n_marks, then per mark: origin_region, ts.
-- Returns the pending fields applied.
local n = tonumber(ARGV[1])
local applied = {}
local a, k = 2, 3
for u = 1, n do
  local field, ts, src, origin, nops = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2], ARGV[a + 3], tonumber(ARGV[a + 4])
  local p = a + 5
  if redis.call('HDEL', KEYS[1], field) == 1 then
    p = apply_ops(KEYS[k], KEYS[k + 1], KEYS[k + 2], origin, ts, src, p, nops)
    applied[#applied + 1] = field
  else
    p = p + 3 * nops
  end
  a, k = p, k + 3
end
local marks = tonumber(ARGV[a])
for m = 1, marks do
  local origin, ts = ARGV[a + 2 * m - 1], tonumber(ARGV[a + 2 * m])
  local cur = tonumber(redis.call('HGET', KEYS[2], origin) or '0')
  if ts > cur then redis.call('HSET', KEYS[2], origin, I(ts)) end
end
return applied
