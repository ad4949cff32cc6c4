-- Gear HEARTBEAT: promise that every later label of this gear is above the returned time (the
-- stable time): raises last_ts to the physical clock and returns it. With a stream (KEYS[2])
-- and a cursor, also returns that stream's entries after the cursor up to the stable time (at
-- most ARGV[2] of them), in the same atomic call: whoever tails the stream gets everything
-- written before the promise in the round trip that makes it.
-- KEYS: gear [, stream]. ARGV: [cursor ts, count]. Reply: stable, or {stable, entries}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local stable = tonumber(redis.call('HGET', KEYS[1], 'last_ts') or '0')
if now > stable then
  redis.call('HSET', KEYS[1], 'last_ts', I(now))
  stable = now
end
if KEYS[2] == nil then
  return stable
end
local entries = redis.call('XRANGE', KEYS[2], '(' .. ARGV[1] .. '-0', I(stable) .. '-0', 'COUNT', ARGV[2])
return {I(stable), entries}
