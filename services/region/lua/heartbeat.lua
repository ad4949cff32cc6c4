-- Gear HEARTBEAT (services only): promise that every later label of this gear is above the
-- returned time (the stable time): raises last_ts to the physical clock and returns it. With a
-- stream (keys[1]) and a cursor, also returns that stream's entries after the cursor up to the
-- stable time (at most args[2] of them), in the same atomic call: whoever tails the stream gets
-- everything written before the promise in the round trip that makes it.
-- keys: [stream]. args: [cursor ts, count]. Reply: stable, or {stable, entries}.
local function gear_heartbeat(keys, args)
  local now = now_us()
  local stable = tonumber(redis.call('HGET', GEAR_KEY, 'last_ts') or '0')
  if now > stable then
    redis.call('HSET', GEAR_KEY, 'last_ts', I(now))
    stable = now
  end
  if keys[1] == nil then
    return stable
  end
  local entries = redis.call('XRANGE', keys[1], '(' .. args[1] .. '-0', I(stable) .. '-0', 'COUNT', args[2])
  return {I(stable), entries}
end
