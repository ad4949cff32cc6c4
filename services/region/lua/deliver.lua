-- Remote proxy DELIVER (saturn): make a run of labelled updates visible, in Saturn's order, and
-- raise the per-origin watermarks. Exactly once: an update at or below its origin's watermark on
-- this shard (as it was when the call began) was applied before and is skipped. On shard 0 the
-- watermarks are the proxy's: attaches wait on them and bulk transfer resumes from them.
-- When a watermark rises, an entry goes to the events stream (capped), on which attaches that
-- wait for the watermarks block (XREAD) instead of polling them.
-- KEYS: watermark hash, watermark events stream, then per update: data hash, column index,
--       counters.
-- ARGV: events maxlen, n_updates, then per update: ts, src, origin_region, n_ops, then per op:
--       kind, column, arg; then n_marks, then per mark: origin_region, ts.
-- Returns "src|ts" of each update applied.
local n = tonumber(ARGV[2])
local applied = {}
local through = {}
local a, k = 3, 3
for u = 1, n do
  local ts, src, origin, nops = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3])
  local p = a + 4
  if through[origin] == nil then
    through[origin] = tonumber(redis.call('HGET', KEYS[1], origin) or '0')
  end
  if ts > through[origin] then
    p = apply_ops(KEYS[k], KEYS[k + 1], KEYS[k + 2], origin, ts, src, p, nops)
    applied[#applied + 1] = src .. '|' .. I(ts)
  else
    p = p + 3 * nops
  end
  a, k = p, k + 3
end
local marks = tonumber(ARGV[a])
local raised = false
for m = 1, marks do
  local origin, ts = ARGV[a + 2 * m - 1], tonumber(ARGV[a + 2 * m])
  local cur = tonumber(redis.call('HGET', KEYS[1], origin) or '0')
  if ts > cur then
    redis.call('HSET', KEYS[1], origin, I(ts))
    raised = true
  end
end
if raised then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[1], '*', 'r', '')
end
return applied
